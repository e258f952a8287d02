//! Test messages: a clean newsletter and an obvious spam, each with the envelope it arrives with.

use spam::Envelope;

/// A well-formed newsletter: complete headers, List-Unsubscribe, text and HTML alternatives.
pub fn clean_newsletter() -> Vec<u8> {
    let date = chrono::Utc::now().to_rfc2822();
    format!(
        "Date: {date}\r\n\
Message-ID: <20261122.4711.news@mail.acme-garden.example.com>\r\n\
From: Acme Garden Club <news@acme-garden.example.com>\r\n\
To: Jane Doe <jane@example.org>\r\n\
Subject: November notes: planting bulbs before the frost\r\n\
List-Unsubscribe: <https://acme-garden.example.com/unsubscribe?u=4711>, <mailto:unsubscribe@acme-garden.example.com>\r\n\
List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/alternative; boundary=\"b1_acme\"\r\n\
\r\n\
--b1_acme\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Content-Transfer-Encoding: 7bit\r\n\
\r\n\
Hello Jane,\r\n\
\r\n\
November is the month to plant tulip and daffodil bulbs. Set them three times as deep\r\n\
as they are tall, water once, and cover the bed with a layer of leaves.\r\n\
\r\n\
Our next meeting is on the first Thursday of December at the community hall.\r\n\
Read the full notes: https://acme-garden.example.com/notes/november\r\n\
\r\n\
You receive this because you joined the Acme Garden Club mailing list.\r\n\
Unsubscribe: https://acme-garden.example.com/unsubscribe?u=4711\r\n\
\r\n\
--b1_acme\r\n\
Content-Type: text/html; charset=utf-8\r\n\
Content-Transfer-Encoding: 7bit\r\n\
\r\n\
<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>November notes</title></head>\r\n\
<body style=\"margin:0;font-family:Arial,sans-serif\">\r\n\
<table width=\"600\" align=\"center\" role=\"presentation\"><tr><td>\r\n\
<h1>November notes</h1>\r\n\
<p>Hello Jane,</p>\r\n\
<p>November is the month to plant tulip and daffodil bulbs. Set them three times as deep\r\n\
as they are tall, water once, and cover the bed with a layer of leaves.</p>\r\n\
<p>Our next meeting is on the first Thursday of December at the community hall.</p>\r\n\
<p><a href=\"https://acme-garden.example.com/notes/november\">Read the full notes</a></p>\r\n\
<p style=\"font-size:12px;color:#666\">You receive this because you joined the Acme Garden Club mailing list.\r\n\
<a href=\"https://acme-garden.example.com/unsubscribe?u=4711\">Unsubscribe</a></p>\r\n\
</td></tr></table>\r\n\
</body></html>\r\n\
\r\n\
--b1_acme--\r\n"
    )
    .into_bytes()
}

pub fn clean_envelope() -> Envelope {
    Envelope {
        client_ip: "203.0.113.25".parse().expect("literal ip"),
        helo: "mail.acme-garden.example.com".into(),
        hostname: "mail.acme-garden.example.com".into(),
        mail_from: "bounces@acme-garden.example.com".into(),
        rcpt_to: vec!["jane@example.org".into()],
    }
}

/// Shouting subject, pharma and money phrases, a link to a bare IP, HTML only, no Message-ID.
pub fn obvious_spam() -> Vec<u8> {
    let date = chrono::Utc::now().to_rfc2822();
    format!(
        "Date: {date}\r\n\
From: \"Best Pharmacy Deals\" <deals@cheap-meds-4u.example>\r\n\
To: undisclosed-recipients:;\r\n\
Subject: CHEAP VIAGRA AND CIALIS - 100% GUARANTEED!!! ACT NOW $$$\r\n\
MIME-Version: 1.0\r\n\
Content-Type: text/html; charset=us-ascii\r\n\
\r\n\
<html><body>\r\n\
<h1>BUY VIAGRA ONLINE - NO PRESCRIPTION NEEDED!!!</h1>\r\n\
<p>Online pharmacy with the LOWEST PRICES. Cheap Viagra, Cialis and Levitra, 100% guaranteed\r\n\
satisfaction, risk-free. No prescription required! Limited time offer, order now!</p>\r\n\
<p>MAKE MONEY FAST: earn extra cash from home, double your income, cash bonus of $1,000,000 US DOLLARS!</p>\r\n\
<p><a href=\"http://198.51.100.77/pharmacy/buy.php?id=99\">CLICK HERE NOW</a> - expires today, act now!</p>\r\n\
<p><a href=\"http://198.51.100.77/remove.php\">remove</a></p>\r\n\
</body></html>\r\n"
    )
    .into_bytes()
}

pub fn spam_envelope() -> Envelope {
    Envelope {
        client_ip: "198.51.100.77".parse().expect("literal ip"),
        helo: "PC-4711".into(),
        hostname: "unknown".into(),
        mail_from: "deals@cheap-meds-4u.example".into(),
        rcpt_to: vec!["jane@example.org".into(), "john@example.org".into()],
    }
}
