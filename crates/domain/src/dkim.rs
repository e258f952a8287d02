//! A DKIM public key as DNS publishes it: the service signs its own `svc` sends and its spam
//! filter answers for that one name from the key it holds, so the record crosses from the signer
//! (smtp) through the mail service (inbox) to the verifier (spam) as this type.

/// The TXT record `value` published at `name` (`<selector>._domainkey.<domain>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DkimTxtRecord {
    pub name: String,
    pub value: String,
}

impl DkimTxtRecord {
    /// The name as resolvers ask for it: lowercase with the root's trailing dot.
    pub fn fqdn(&self) -> String {
        let mut fqdn = self.name.trim_end_matches('.').to_ascii_lowercase();
        fqdn.push('.');
        fqdn
    }
}

#[cfg(test)]
mod tests {
    use super::DkimTxtRecord;

    #[test]
    fn the_name_is_asked_for_lowercase_and_rooted() {
        let record = DkimTxtRecord {
            name: "MP1._domainkey.Seeds.Example".into(),
            value: "v=DKIM1; k=rsa; p=AAAA".into(),
        };
        assert_eq!(record.fqdn(), "mp1._domainkey.seeds.example.");
        let rooted = DkimTxtRecord {
            name: "mp1._domainkey.seeds.example.".into(),
            ..record
        };
        assert_eq!(rooted.fqdn(), "mp1._domainkey.seeds.example.");
    }
}
