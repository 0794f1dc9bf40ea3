//! The algorithm catalogue is part of the engine's interface: Python reads it
//! (`cca_catalogue_json`) to list algorithms and check scenario parameters. This
//! test pins it, so that moving code around the parameter declarations cannot
//! change a name, default, range or description unnoticed. After a deliberate
//! change, regenerate the file with `CCARENA_BLESS=1 cargo test --test catalogue`.

const EXPECTED: &str = include_str!("data/cca_catalogue.json");

#[test]
fn catalogue_is_unchanged() {
    let got = serde_json::to_string_pretty(&ccarena_sim::cc::cca_catalogue()).unwrap() + "\n";
    if std::env::var_os("CCARENA_BLESS").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cca_catalogue.json");
        std::fs::write(path, &got).unwrap();
        return;
    }
    if got != EXPECTED {
        let first = got.lines().zip(EXPECTED.lines()).position(|(a, b)| a != b);
        panic!("the catalogue changed (first differing line: {first:?}); see tests/data/cca_catalogue.json\n{got}");
    }
}
