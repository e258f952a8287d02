//! Analytics campaigns: created through the application layer, their report read by the owner
//! only.

use app::campaigns::{self, CampaignRequest};
use app::ErrorName;

use crate::fixture;

#[tokio::test]
async fn a_created_campaign_has_a_report_its_owner_alone_reads() {
    let f = fixture().await;
    let req = CampaignRequest {
        name: Some("Spring".into()),
        total_subscribers: Some(1_000),
        click_html: Some(r#"<a href="https://shop.example/">Shop</a>"#.into()),
        ..CampaignRequest::default()
    };
    let created = campaigns::create_campaign(&f.state, &f.alice, req)
        .await
        .expect("created");
    assert!(created.stored);
    assert!(
        created.tracking_code.contains(&created.guid),
        "{}",
        created.tracking_code
    );
    let (html, links) = created.click_tracking.expect("click tracking");
    assert_eq!(links, 1);
    assert!(html.contains("http://mailproof.test/t/"), "{html}");

    let (row, report) = campaigns::campaign_report(&f.state, &f.alice, &created.guid)
        .await
        .expect("the owner reads the report");
    assert_eq!(row.campaign.name, "Spring");
    assert_eq!(campaigns::status(&row, 0), "testing");
    assert_eq!(report.clicks.len(), 1, "one tracked link, no click yet");
    assert_eq!(report.clicks[0].clicks.hits, 0);

    let err = campaigns::campaign_report(&f.state, &f.bob, &created.guid)
        .await
        .expect_err("not bob's");
    assert_eq!(err.name, ErrorName::NoCampaigns);
    let err = app::owned_campaign(&f.state, &f.alice, "not-a-guid")
        .await
        .expect_err("malformed");
    assert_eq!(err.name, ErrorName::InvalidData);
}

#[tokio::test]
async fn campaign_refusals_carry_the_spec_error_names() {
    let f = fixture().await;
    let err = campaigns::create_campaign(&f.state, &f.alice, CampaignRequest::default())
        .await
        .expect_err("nothing given");
    assert_eq!(err.name, ErrorName::NoContent);
    let bad_thresholds = CampaignRequest {
        name: Some("x".into()),
        total_subscribers: Some(10),
        read_threshold: Some(1),
        skim_threshold: Some(5),
        ..CampaignRequest::default()
    };
    let err = campaigns::create_campaign(&f.state, &f.alice, bad_thresholds)
        .await
        .expect_err("delete ≤ skim ≤ read");
    assert_eq!(err.name, ErrorName::InvalidData);
    assert!(err.message.contains("skim_threshold"), "{}", err.message);
    let err = campaigns::whole_from_text("read_threshold", "soon").expect_err("not a number");
    assert_eq!(err.name, ErrorName::InvalidData);
    assert_eq!(
        campaigns::whole_from_text("read_threshold", " 12 "),
        Ok(Some(12))
    );
}
