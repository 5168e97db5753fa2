//! Names of things as both sides pass them around: each kind of id its own type, so a plan
//! id cannot be handed where a cell id is wanted. On the wire, in journals and in the store
//! they are plain strings (`serde(transparent)`); in code they read as `&str` (`Deref`).

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(id: impl Into<String>) -> Self {
                $name(id.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_string())
            }
        }

        impl From<&String> for $name {
            fn from(s: &String) -> Self {
                $name(s.clone())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    )*};
}

string_id! {
    /// A campaign as the coordinator stored it (`c-…`): one submission of a campaign file.
    CampaignId;
    /// One host's plan of a campaign, named by the hash of its content (`p-…`).
    PlanId;
    /// One point of a campaign's matrix on one selected device.
    CellId;
    /// A host's name, its identity towards the coordinator (`--name`, the hostname, or
    /// the CN of its certificate).
    HostName;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strings_outside_and_their_own_types_inside() {
        let p = PlanId::from("p-1");
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"p-1\"");
        assert_eq!(serde_json::from_str::<PlanId>("\"p-1\"").unwrap(), p);
        assert_eq!(p, "p-1");
        assert_eq!(&*p, "p-1");
        assert_eq!(p.to_string(), "p-1");
        let mut m = std::collections::HashMap::new();
        m.insert(HostName::from("rc66"), 1);
        assert_eq!(m.get("rc66"), Some(&1), "looked up by &str");
    }
}
