//! Issue 9, point 5: the reprocess quota is spent per client, not per mention of a client.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_client_named_several_times_in_one_reprocess_spends_one_reprocess() {
    let s = Server::start().await;
    let defaults = s.get("/v5/email/clients/default").await.ok()["clients"].clone();
    let c = defaults[0].as_str().expect("client").to_string();
    let created = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "S", "html": "x", "clients": [c]}),
        )
        .await;
    let id = created.ok()["id"].as_str().expect("id").to_string();
    let path = format!("/v5/email/tests/{id}/results/reprocess");
    let first = s
        .put(&path, &json!({"clients": [c.clone()]}))
        .await
        .ok()
        .clone();
    let before = first[&c]["remaining_reprocesses"]
        .as_i64()
        .expect("remaining");
    let r = s
        .put(
            &path,
            &json!({"clients": [c.clone(), c.clone(), c.clone()]}),
        )
        .await
        .ok()
        .clone();
    assert_eq!(r[&c]["success"], true, "{r}");
    assert_eq!(r[&c]["remaining_reprocesses"], before - 1, "{r}");
    // What was spent is what the next request sees.
    let r = s
        .put(&path, &json!({"clients": [c.clone()]}))
        .await
        .ok()
        .clone();
    assert_eq!(r[&c]["remaining_reprocesses"], before - 2, "{r}");
}
