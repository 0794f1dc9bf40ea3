//! Build script: hashes the engine's sources (both crates' `src`, their
//! manifests and `Cargo.lock`) into `CCARENA_ENGINE_SOURCE_HASH`, which the
//! module exports as `ENGINE_BUILD`. Stored runs carry it, so results computed
//! by another engine are recognised (docs/results.md). FNV-1a over the sorted
//! relative paths and contents: an identity, not a security measure, and no
//! build dependency.

use std::fs;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn fnv1a(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut list = Vec::new();
    for part in ["crates/sim/src", "crates/py/src"] {
        files(&root.join(part), &mut list);
        println!("cargo:rerun-if-changed={}", root.join(part).display());
    }
    for part in ["crates/sim/Cargo.toml", "crates/py/Cargo.toml", "Cargo.toml", "Cargo.lock"] {
        list.push(root.join(part));
        println!("cargo:rerun-if-changed={}", root.join(part).display());
    }
    let mut named: Vec<(String, PathBuf)> = list
        .into_iter()
        .map(|p| (p.strip_prefix(&root).unwrap_or(&p).to_string_lossy().replace('\\', "/"), p))
        .collect();
    named.sort();
    // Two differently seeded 64-bit hashes: 128 bits make a collision between builds negligible.
    let (mut a, mut b) = (0xcbf2_9ce4_8422_2325_u64, 0x6c62_272e_07bb_0142_u64);
    for (name, path) in &named {
        let Ok(data) = fs::read(path) else { continue };
        for h in [&mut a, &mut b] {
            fnv1a(h, name.as_bytes());
            fnv1a(h, &[0]);
            fnv1a(h, &(data.len() as u64).to_le_bytes());
            fnv1a(h, &data);
        }
    }
    println!("cargo:rustc-env=CCARENA_ENGINE_SOURCE_HASH={a:016x}{b:016x}");
}
