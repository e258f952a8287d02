//! Spec §2.6 and §4.3: the client list and default clients, per plan.

use serde_json::{json, Value};

use crate::support::*;

fn id_list(v: &Value) -> Vec<String> {
    v["clients"]
        .as_array()
        .expect("clients array")
        .iter()
        .map(|c| c.as_str().expect("id").to_string())
        .collect()
}

/// The listed profiles' ids, without the alias entries (those copy a profile under another id).
fn profile_ids(clients: &Value) -> Vec<String> {
    clients
        .as_object()
        .expect("clients")
        .iter()
        .filter(|(_, c)| c["alias_of"].is_null())
        .map(|(id, _)| id.clone())
        .collect()
}

#[tokio::test]
async fn the_client_list_has_every_spec_field_across_categories() {
    let s = Server::start().await;
    let body = s.get("/v5/email/clients").await.ok().clone();
    let clients = body["clients"].as_object().expect("clients object");
    assert!(clients.len() >= 30);
    let mut categories = std::collections::BTreeSet::new();
    for (id, c) in clients {
        assert_eq!(c["id"], id.as_str());
        for f in ["client", "os", "category"] {
            assert!(c[f].is_string(), "{id}.{f}");
        }
        for f in ["rotate", "image_blocking", "free", "default"] {
            assert!(c[f].is_boolean(), "{id}.{f}");
        }
        if c["category"] == "Web" {
            assert!(
                c["browser"].is_string(),
                "{id} is a Web client and names its browser"
            );
        }
        categories.insert(c["category"].as_str().expect("category").to_string());
    }
    assert_eq!(
        categories.into_iter().collect::<Vec<_>>(),
        ["Application", "Mobile", "Web"]
    );
}

#[tokio::test]
async fn default_clients_follow_the_three_rules() {
    let s = Server::start().await;
    let before = id_list(s.get("/v5/email/clients/default").await.ok());
    assert!(!before.is_empty());
    let all = s.get("/v5/email/clients").await.ok()["clients"].clone();
    let some: Vec<String> = profile_ids(&all).into_iter().take(2).collect();

    // Rule 1: invalid ids are dropped and reported.
    let r = s
        .put(
            "/v5/email/clients/default",
            &json!({"clients": [some[0], "bogus"]}),
        )
        .await
        .ok()
        .clone();
    assert_eq!(id_list(&r), vec![some[0].clone()]);
    assert!(r["warnings"].as_array().expect("warnings")[0]
        .as_str()
        .expect("text")
        .contains("bogus"));
    assert_eq!(
        id_list(s.get("/v5/email/clients/default").await.ok()),
        vec![some[0].clone()]
    );
    let id = s
        .post("/v5/email/tests", &json!({"subject": "S", "html": "x"}))
        .await
        .ok()["id"]
        .clone();
    let info = s
        .get(&format!("/v5/email/tests/{}", id.as_str().expect("id")))
        .await
        .ok()
        .clone();
    assert_eq!(info["processing"], json!([some[0]]));

    // Rule 2: nothing valid changes nothing and is an error.
    s.put("/v5/email/clients/default", &json!({"clients": ["bogus"]}))
        .await
        .expect_error("InvalidClient", 400);
    assert_eq!(
        id_list(s.get("/v5/email/clients/default").await.ok()),
        vec![some[0].clone()]
    );

    // Rule 3: an empty list clears the defaults; tests then run every client.
    let r = s
        .put("/v5/email/clients/default", &json!({"clients": []}))
        .await
        .ok()
        .clone();
    assert_eq!(id_list(&r), Vec::<String>::new());
    let id = s
        .post("/v5/email/tests", &json!({"subject": "S", "html": "x"}))
        .await
        .ok()["id"]
        .clone();
    let info = s
        .get(&format!("/v5/email/tests/{}", id.as_str().expect("id")))
        .await
        .ok()
        .clone();
    assert_eq!(
        info["processing"].as_array().expect("list").len(),
        profile_ids(&all).len(),
        "every profile, and no alias twice"
    );

    s.put("/v5/email/clients/default", &json!({}))
        .await
        .expect_error("NoClients", 400);
}

#[tokio::test]
async fn restricted_and_free_plans_see_only_their_clients() {
    let s = Server::start().await;
    let all = s.get("/v5/email/clients").await.ok()["clients"].clone();
    let all = all.as_object().expect("clients");
    let two: Vec<String> = profile_ids(&s.get("/v5/email/clients").await.ok()["clients"])
        .into_iter()
        .take(2)
        .collect();
    s.add_account("narrow", "standard", &["--clients", &two.join(",")]);
    let narrow = Some(("narrow", "password-1"));
    let listed = s.call("GET", "/v5/email/clients", narrow, None).await.ok()["clients"].clone();
    let mut listed: Vec<String> = listed
        .as_object()
        .expect("clients")
        .keys()
        .cloned()
        .collect();
    listed.sort();
    let mut want = two.clone();
    want.sort();
    assert_eq!(listed, want);
    let other = all
        .keys()
        .find(|k| !two.contains(k))
        .expect("a third client");
    s.call(
        "POST",
        "/v5/email/tests",
        narrow,
        Some(&json!({"subject": "S", "html": "x", "clients": [other]})),
    )
    .await
    .expect_error("InvalidClient", 400);

    s.add_account("gratis", "free", &[]);
    let free = Some(("gratis", "password-1"));
    let listed = s.call("GET", "/v5/email/clients", free, None).await.ok()["clients"].clone();
    assert!(listed
        .as_object()
        .expect("clients")
        .values()
        .all(|c| c["free"] == true));
    let id = s
        .call(
            "POST",
            "/v5/email/tests",
            free,
            Some(&json!({"subject": "S", "html": "x"})),
        )
        .await
        .ok()["id"]
        .clone();
    let r = s
        .call(
            "GET",
            &format!("/v5/email/tests/{}/results", id.as_str().expect("id")),
            free,
            None,
        )
        .await;
    for c in r.ok().as_object().expect("results").keys() {
        assert_eq!(all[c]["free"], true, "{c} ran in a free test");
    }
}

#[tokio::test]
async fn a_restricted_plan_whose_clients_are_not_defaults_tests_all_of_its_clients_by_default() {
    let s = Server::start().await;
    let all = s.get("/v5/email/clients").await.ok()["clients"].clone();
    let mut not_default: Vec<String> = all
        .as_object()
        .expect("clients")
        .iter()
        .filter(|(_, c)| c["default"] != true && c["alias_of"].is_null())
        .map(|(id, _)| id.clone())
        .take(2)
        .collect();
    not_default.sort();
    assert_eq!(not_default.len(), 2, "the catalog has non-default clients");
    s.add_account("niche", "standard", &["--clients", &not_default.join(",")]);
    let niche = Some(("niche", "password-1"));

    // No default is usable, so the default list is empty, which means "all clients" (§4.3 rule 3)...
    let defaults = s
        .call("GET", "/v5/email/clients/default", niche, None)
        .await
        .ok()["clients"]
        .clone();
    assert_eq!(defaults, json!([]));
    // ...and a test without `clients` runs every client this plan may use, as after a clear.
    let id = s
        .call(
            "POST",
            "/v5/email/tests",
            niche,
            Some(&json!({"subject": "S", "html": "x"})),
        )
        .await
        .ok()["id"]
        .clone();
    let info = s
        .call(
            "GET",
            &format!("/v5/email/tests/{}", id.as_str().expect("id")),
            niche,
            None,
        )
        .await
        .ok()
        .clone();
    let mut processed: Vec<String> = info["processing"]
        .as_array()
        .expect("processing")
        .iter()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect();
    processed.sort();
    assert_eq!(processed, not_default);
}

/// Issue 11 point 5: the ids existing v5 client libraries send by default are accepted and
/// answered under the id the caller sent, drawn by the closest profile.
#[tokio::test]
async fn default_ids_of_existing_v5_libraries_work_as_aliases() {
    let s = Server::start().await;
    let listed = s.get("/v5/email/clients").await.ok().clone();
    assert_eq!(
        listed["clients"]["outlook2016_win"]["aliases"],
        json!(["outlook16"])
    );
    // Issue 19 point 8: tools that keep only the listed ids (the Node snapshot tools) find
    // their stock ids in the list, each naming the listed profile that draws it.
    for stock in ["iphone6p_9", "gmail_chr26_win", "outlook16"] {
        let entry = &listed["clients"][stock];
        assert_eq!(entry["id"], stock, "{stock} is not listed");
        assert_eq!(entry["default"], false, "an alias is never a default");
        let target = entry["alias_of"]
            .as_str()
            .expect("alias_of names the profile");
        let profile = &listed["clients"][target];
        assert_eq!(
            profile["id"], target,
            "{stock}'s target {target} is not listed"
        );
        assert!(
            profile["aliases"]
                .as_array()
                .is_some_and(|a| a.contains(&json!(stock))),
            "{target} does not list {stock} among its aliases"
        );
        assert_eq!(entry["display_name"], profile["display_name"]);
    }
    let defaults = s.get("/v5/email/clients/default").await.ok().clone();
    assert!(
        !defaults["clients"]
            .as_array()
            .expect("default list")
            .contains(&json!("outlook16")),
        "aliases stay out of the default list"
    );
    let library_defaults = [
        "iphone6p_9",
        "gmail_chr26_win",
        "outlook16",
        "iphone12_15",
        "ipadpro_12_15",
        "applemail13",
    ];
    let created = s
        .post(
            "/v5/email/tests",
            &json!({"subject": "S", "html": "<p>x</p>", "clients": library_defaults}),
        )
        .await
        .ok()
        .clone();
    let id = created["id"].as_str().expect("id");
    let results = s
        .get(&format!("/v5/email/tests/{id}/results"))
        .await
        .ok()
        .clone();
    for alias in library_defaults {
        let r = &results[alias];
        assert_eq!(r["id"], alias, "{results}");
        assert!(r["alias_of"].is_string(), "{r}");
    }
    let one = s
        .get(&format!("/v5/email/tests/{id}/results/outlook16"))
        .await
        .ok()
        .clone();
    assert_eq!(one["outlook16"]["display_name"], "Outlook 2016 (Windows)");
}
