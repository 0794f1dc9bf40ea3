//! What an algorithm's tunable parameters are: their values as scenarios give
//! them (`ParamValue`), their catalogue entries with default, range and
//! description (`CcaParam`, collected in an algorithm's `CcaInfo`), and the
//! checked table an algorithm is built from (`Params`). Wrong names, types and
//! out-of-range values are errors that name the parameter.
//!
//! An algorithm declares each parameter once, as Linux does with
//! `module_param` + `MODULE_PARM_DESC`, in a `declare_params!` block: name,
//! type, default, range and description. The macro writes the configuration
//! struct, its `Default`, the catalogue entries (`catalogue()`) and the
//! constructor from a checked table (`from_params`), so the four cannot drift
//! apart and no parameter is looked up by a hand-typed string:
//!
//! ```ignore
//! declare_params! {
//!     /// Module parameters of `tcp_cubic` with their Linux defaults.
//!     pub struct CubicConfig {
//!         fast_convergence: bool = true, "release bandwidth faster when W_max shrinks";
//!         /// 717 / 1024 = 0.7.
//!         beta: u32 = 717, range(1, 1023), "multiplicative decrease x 1024";
//!     }
//! }
//! ```
//!
//! `range(min, max)` is inclusive and written in the field's type; without it a
//! number may take any value of its type. `///` lines above a parameter (its
//! source, its units in detail) document the struct field after the description.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A parameter value as scenarios give it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl std::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
        }
    }
}

/// A tunable of an algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct CcaParam {
    pub name: &'static str,
    pub default: ParamValue,
    /// Inclusive range for numbers; ignored for booleans.
    pub min: f64,
    pub max: f64,
    pub doc: &'static str,
}

/// What `ccarena list ccas` shows about an algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct CcaInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub source: &'static str,
    pub params: Vec<CcaParam>,
}

impl CcaParam {
    /// The catalogue entry of a parameter of type `T`; `range` is (min, max) in
    /// the catalogue's units, as `ParamType::bounds` or `FULL_RANGE` give it.
    pub fn new<T: ParamType>(name: &'static str, default: T, range: (f64, f64), doc: &'static str) -> CcaParam {
        CcaParam { name, default: default.to_value(), min: range.0, max: range.1, doc }
    }
}

/// A Rust type a parameter may have, and how it meets the values scenarios give.
/// `from_value` cannot fail: `Params::new` has already refused values of
/// another kind or outside the declared range.
pub trait ParamType: Copy {
    /// The range of a parameter declared without one.
    const FULL_RANGE: (f64, f64);
    fn to_value(self) -> ParamValue;
    fn from_value(v: &ParamValue) -> Self;
    /// The range `min..=max` in the catalogue's units.
    fn bounds(min: Self, max: Self) -> (f64, f64);
}

impl ParamType for bool {
    const FULL_RANGE: (f64, f64) = (0.0, 1.0);
    fn to_value(self) -> ParamValue {
        ParamValue::Bool(self)
    }
    fn from_value(v: &ParamValue) -> bool {
        matches!(v, ParamValue::Bool(true))
    }
    fn bounds(min: bool, max: bool) -> (f64, f64) {
        (min as u8 as f64, max as u8 as f64)
    }
}

fn int_of(v: &ParamValue) -> i64 {
    match v {
        ParamValue::Int(i) => *i,
        ParamValue::Float(x) => *x as i64,
        ParamValue::Bool(b) => *b as i64,
    }
}

macro_rules! int_param_type {
    ($($t:ty),*) => {$(
        impl ParamType for $t {
            const FULL_RANGE: (f64, f64) = (<$t>::MIN as f64, <$t>::MAX as f64);
            fn to_value(self) -> ParamValue {
                ParamValue::Int(self as i64)
            }
            fn from_value(v: &ParamValue) -> $t {
                int_of(v) as $t
            }
            fn bounds(min: $t, max: $t) -> (f64, f64) {
                (min as f64, max as f64)
            }
        }
    )*};
}
int_param_type!(u32, u64, i64);

impl ParamType for f64 {
    const FULL_RANGE: (f64, f64) = (f64::MIN, f64::MAX);
    fn to_value(self) -> ParamValue {
        ParamValue::Float(self)
    }
    fn from_value(v: &ParamValue) -> f64 {
        match v {
            ParamValue::Int(i) => *i as f64,
            ParamValue::Float(x) => *x,
            ParamValue::Bool(b) => *b as u8 as f64,
        }
    }
    fn bounds(min: f64, max: f64) -> (f64, f64) {
        (min, max)
    }
}

/// Declares an algorithm's parameters once; see the module documentation.
macro_rules! declare_params {
    (@range $ty:ty) => {
        <$ty as $crate::cc::params::ParamType>::FULL_RANGE
    };
    (@range $ty:ty, $min:expr, $max:expr) => {
        <$ty as $crate::cc::params::ParamType>::bounds($min, $max)
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $field:ident : $ty:ty = $default:expr $(, range($min:expr, $max:expr))? , $doc:literal ;
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        $vis struct $name {
            $(
                #[doc = $doc]
                #[doc = ""]
                $(#[$fmeta])*
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* }
            }
        }

        impl $name {
            /// The parameters' catalogue entries, in the order declared.
            pub fn catalogue() -> Vec<$crate::cc::params::CcaParam> {
                vec![$(
                    $crate::cc::params::CcaParam::new::<$ty>(
                        stringify!($field),
                        $default,
                        $crate::cc::params::declare_params!(@range $ty $(, $min, $max)?),
                        $doc,
                    ),
                )*]
            }

            /// The configuration a checked table gives (defaults for what it omits).
            pub fn from_params(p: &$crate::cc::params::Params) -> Self {
                $name { $($field: p.get::<$ty>(stringify!($field)),)* }
            }
        }
    };
}
pub(crate) use declare_params;

/// Reads validated parameters of one algorithm.
pub struct Params<'a> {
    cca: &'a str,
    given: &'a BTreeMap<String, ParamValue>,
    spec: Vec<CcaParam>,
}

impl<'a> Params<'a> {
    pub fn new(cca: &'a str, given: &'a BTreeMap<String, ParamValue>, spec: Vec<CcaParam>) -> Result<Self, String> {
        for (k, v) in given {
            let Some(p) = spec.iter().find(|p| p.name == k) else {
                let allowed: Vec<_> = spec.iter().map(|p| p.name).collect();
                return Err(format!(
                    "cca_params.{k}: unknown parameter for {cca}; allowed: {}",
                    if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") }
                ));
            };
            let ok = match (&p.default, v) {
                (ParamValue::Bool(_), ParamValue::Bool(_)) => true,
                (ParamValue::Bool(_), _) => {
                    return Err(format!("cca_params.{k}: must be true or false, got {v}"));
                }
                (ParamValue::Int(_), ParamValue::Int(i)) => (*i as f64) >= p.min && (*i as f64) <= p.max,
                (ParamValue::Int(_), _) => {
                    return Err(format!("cca_params.{k}: must be an integer in {}..{}, got {v}", p.min, p.max));
                }
                (ParamValue::Float(_), ParamValue::Float(x)) => *x >= p.min && *x <= p.max,
                (ParamValue::Float(_), ParamValue::Int(i)) => (*i as f64) >= p.min && (*i as f64) <= p.max,
                (ParamValue::Float(_), _) => false,
            };
            if !ok {
                return Err(format!("cca_params.{k}: must be in {}..{}, got {v}", p.min, p.max));
            }
        }
        Ok(Params { cca, given, spec })
    }

    fn value(&self, name: &str) -> &ParamValue {
        self.given
            .get(name)
            .or_else(|| self.spec.iter().find(|p| p.name == name).map(|p| &p.default))
            .unwrap_or_else(|| panic!("{}: parameter {name} missing from its own spec", self.cca))
    }

    /// The value of parameter `name`, given or default, as type `T`.
    pub fn get<T: ParamType>(&self, name: &str) -> T {
        T::from_value(self.value(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    declare_params! {
        /// Every kind of parameter once.
        struct TestConfig {
            flag: bool = true, "a flag";
            /// Details go to the field's documentation only.
            count: u32 = 3, range(1, 10), "a count";
            wide: i64 = -5, "any i64";
            ratio: f64 = 0.5, range(0.0, 1.0), "a ratio";
        }
    }

    fn table(pairs: &[(&str, ParamValue)]) -> BTreeMap<String, ParamValue> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn one_declaration_gives_struct_default_and_catalogue() {
        let d = TestConfig::default();
        assert_eq!((d.flag, d.count, d.wide, d.ratio), (true, 3, -5, 0.5));
        let cat = TestConfig::catalogue();
        let names: Vec<_> = cat.iter().map(|p| p.name).collect();
        assert_eq!(names, ["flag", "count", "wide", "ratio"]);
        let ranges: Vec<_> = cat.iter().map(|p| (p.min, p.max)).collect();
        assert_eq!(ranges, [(0.0, 1.0), (1.0, 10.0), (i64::MIN as f64, i64::MAX as f64), (0.0, 1.0)]);
        let defaults: Vec<_> = cat.iter().map(|p| p.default.clone()).collect();
        assert_eq!(defaults, [ParamValue::Bool(true), ParamValue::Int(3), ParamValue::Int(-5), ParamValue::Float(0.5)]);
        assert_eq!(cat[1].doc, "a count");
    }

    #[test]
    fn from_params_reads_given_values_and_defaults_the_rest() {
        let given = table(&[("count", ParamValue::Int(7)), ("ratio", ParamValue::Int(1))]);
        let p = Params::new("test", &given, TestConfig::catalogue()).unwrap();
        assert_eq!(TestConfig::from_params(&p), TestConfig { count: 7, ratio: 1.0, ..TestConfig::default() });
        let none = BTreeMap::new();
        let p = Params::new("test", &none, TestConfig::catalogue()).unwrap();
        assert_eq!(TestConfig::from_params(&p), TestConfig::default());
    }

    #[test]
    fn errors_name_the_parameter() {
        let err = |pairs: &[(&str, ParamValue)]| {
            Params::new("test", &table(pairs), TestConfig::catalogue()).err().expect("refused")
        };
        assert_eq!(err(&[("count", ParamValue::Int(11))]), "cca_params.count: must be in 1..10, got 11");
        assert_eq!(err(&[("count", ParamValue::Float(2.5))]), "cca_params.count: must be an integer in 1..10, got 2.5");
        assert_eq!(err(&[("flag", ParamValue::Int(1))]), "cca_params.flag: must be true or false, got 1");
        assert_eq!(err(&[("ratio", ParamValue::Float(1.5))]), "cca_params.ratio: must be in 0..1, got 1.5");
        let unknown = err(&[("cuont", ParamValue::Int(1))]);
        assert_eq!(unknown, "cca_params.cuont: unknown parameter for test; allowed: flag, count, wide, ratio");
    }
}
