//! The error of a scenario the engine refuses: which field, and why. Errors are
//! built where a check fails, relative to the table being checked (`mss` in a
//! `TcpConfig`), and placed `within` the tables that contain it on the way out
//! (`flows[3].tcp.mss`), so a check never needs to know where its table sits.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted path of the offending field (`network.qdisc.max_p`,
    /// `flows[3].tcp.mss`); empty only before the error is placed in a table.
    pub field: String,
    /// What is wrong and what is allowed, in one line.
    pub message: String,
}

impl ConfigError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError { field: field.into(), message: message.into() }
    }

    /// The same error seen from the table that holds `parent`: `tcp.mss`
    /// within `flows[3]` is `flows[3].tcp.mss`, `[3].tcp.mss` (an error of a
    /// list's entry) within `flows` is `flows[3].tcp.mss`; an error of the
    /// whole table (empty field) becomes an error of `parent` itself.
    pub fn within(mut self, parent: &str) -> ConfigError {
        if parent.is_empty() {
            return self;
        }
        self.field = if self.field.is_empty() {
            parent.to_string()
        } else if self.field.starts_with('[') {
            format!("{parent}{}", self.field)
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }

    /// Reads an error from its text form `field: message`, as the parts of the
    /// engine that report strings (the algorithm registry, algorithms supplied
    /// by the caller) give it. Text without a field path is all message.
    pub fn parse(text: &str) -> ConfigError {
        match text.split_once(": ") {
            Some((field, message)) if is_field_path(field) => ConfigError::new(field, message),
            _ => ConfigError::new("", text),
        }
    }
}

/// Whether `s` reads as a dotted field path such as `flows[3].cca_params.beta`
/// (fields are snake_case, so `TypeError` is not one).
fn is_field_path(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '[' | ']'))
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_nest_and_print_as_field_colon_message() {
        let e = ConfigError::new("mss", "must be in 64..65000 bytes, got 1").within("tcp").within("flows[3]");
        assert_eq!(e.field, "flows[3].tcp.mss");
        assert_eq!(e.to_string(), "flows[3].tcp.mss: must be in 64..65000 bytes, got 1");
        assert_eq!(ConfigError::new("", "needs 0 <= min <= max").within("web[0].sizes").field, "web[0].sizes");
        assert_eq!(ConfigError::new("rtt", "must be positive").within(""), ConfigError::new("rtt", "must be positive"));
        assert_eq!(ConfigError::new("max_p", "x").within("[2]").within("dynamics").field, "dynamics[2].max_p");
    }

    #[test]
    fn text_errors_are_read_back() {
        let e = ConfigError::parse("cca_params.beta: must be in 1..1023, got 5000");
        assert_eq!((e.field.as_str(), e.message.as_str()), ("cca_params.beta", "must be in 1..1023, got 5000"));
        let e = ConfigError::parse("TypeError: bad argument: x");
        assert_eq!((e.field.as_str(), e.to_string().as_str()), ("", "TypeError: bad argument: x"));
        assert_eq!(e.within("flows[0].cca_params").to_string(), "flows[0].cca_params: TypeError: bad argument: x");
    }
}
