//! Recipient addresses the service serves: seed addresses and auto-inbox addresses.

/// What a recipient address names. Domains compare case-insensitively; local parts are lower-cased
/// (seed keys are lower-case; auto-inbox names match case-insensitively).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipient {
    /// `<key>.<profile slug>@<seed domain>`.
    Seed { key: String, slug: String },
    /// `<local>[+<customer_id>]@<inbox domain>`; the customer id keeps its case.
    AutoInbox {
        local: String,
        customer_id: Option<String>,
    },
    /// Not an address of ours.
    Other,
}

/// Longest customer id taken from an address, as the API allows for `customer_id`.
const MAX_CUSTOMER_ID: usize = 255;

impl Recipient {
    pub fn classify(address: &str, seed_domain: &str, inbox_domain: &str) -> Recipient {
        let address = address.trim().trim_start_matches('<').trim_end_matches('>');
        let Some((local, domain)) = address.rsplit_once('@') else {
            return Recipient::Other;
        };
        if local.is_empty() {
            return Recipient::Other;
        }
        if domain.eq_ignore_ascii_case(seed_domain) {
            let lower = local.to_ascii_lowercase();
            return match domain::seed::parse_seed_local_part(&lower) {
                Some((key, slug)) => Recipient::Seed {
                    key: key.to_owned(),
                    slug: slug.to_owned(),
                },
                None => Recipient::Other,
            };
        }
        if domain.eq_ignore_ascii_case(inbox_domain) {
            let (name, customer) = match local.split_once('+') {
                Some((name, customer)) => (name, Some(customer)),
                None => (local, None),
            };
            let customer = customer.filter(|c| !c.is_empty());
            if name.is_empty() || customer.is_some_and(|c| c.len() > MAX_CUSTOMER_ID) {
                return Recipient::Other;
            }
            return Recipient::AutoInbox {
                local: name.to_ascii_lowercase(),
                customer_id: customer.map(str::to_owned),
            };
        }
        Recipient::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEEDS: &str = "seeds.localhost";
    const INBOX: &str = "inbox.localhost";

    #[test]
    fn seed_addresses_name_key_and_profile_whatever_the_case() {
        assert_eq!(
            Recipient::classify("AbCd1234.SpamAssassin-B2b@Seeds.LocalHost", SEEDS, INBOX),
            Recipient::Seed {
                key: "abcd1234".into(),
                slug: "spamassassin-b2b".into()
            }
        );
        assert_eq!(
            Recipient::classify("nodot@seeds.localhost", SEEDS, INBOX),
            Recipient::Other
        );
    }

    #[test]
    fn auto_inbox_addresses_carry_an_optional_customer_id() {
        assert_eq!(
            Recipient::classify("<Team+Cust-42@inbox.localhost>", SEEDS, INBOX),
            Recipient::AutoInbox {
                local: "team".into(),
                customer_id: Some("Cust-42".into())
            }
        );
        assert_eq!(
            Recipient::classify("team+@inbox.localhost", SEEDS, INBOX),
            Recipient::AutoInbox {
                local: "team".into(),
                customer_id: None
            }
        );
        assert_eq!(
            Recipient::classify("+x@inbox.localhost", SEEDS, INBOX),
            Recipient::Other
        );
    }

    #[test]
    fn other_domains_are_never_ours() {
        for a in [
            "a@example.org",
            "team@inbox.localhost.evil",
            "nodomain",
            "@seeds.localhost",
        ] {
            assert_eq!(
                Recipient::classify(a, SEEDS, INBOX),
                Recipient::Other,
                "{a}"
            );
        }
    }
}
