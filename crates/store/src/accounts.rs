//! Accounts: credentials, plan, limits, auto-inbox and per-account default clients.

use domain::Plan;
use sqlx::Row;

use crate::{json_vec, parse_json_vec, Result, Store, StoreError};

#[derive(Clone, Debug, PartialEq)]
pub struct Account {
    pub id: i64,
    pub api_key: String,
    /// PHC string (argon2id); never the password itself.
    pub password_hash: String,
    pub plan: Plan,
    pub monthly_test_limit: Option<i64>,
    pub rate_limit_per_minute: Option<i64>,
    /// `Some` makes the plan client-restricted.
    pub allowed_clients: Option<Vec<String>>,
    pub auto_inbox: Option<String>,
    /// `None`: the catalog's defaults; `Some([])`: every client.
    pub default_clients: Option<Vec<String>>,
    pub created_at: i64,
}

#[derive(Clone, Debug)]
pub struct NewAccount {
    pub api_key: String,
    pub password_hash: String,
    pub plan: Plan,
    pub monthly_test_limit: Option<i64>,
    pub rate_limit_per_minute: Option<i64>,
    pub allowed_clients: Option<Vec<String>>,
    pub auto_inbox: Option<String>,
}

fn account_from_row(row: &sqlx::any::AnyRow) -> Result<Account> {
    let plan: String = row.try_get("plan")?;
    let allowed: Option<String> = row.try_get("allowed_clients")?;
    let defaults: Option<String> = row.try_get("default_clients")?;
    Ok(Account {
        id: row.try_get("id")?,
        api_key: row.try_get("api_key")?,
        password_hash: row.try_get("password_hash")?,
        plan: plan
            .parse()
            .map_err(|e: domain::plan::UnknownPlan| StoreError::Corrupt(e.to_string()))?,
        monthly_test_limit: row.try_get("monthly_test_limit")?,
        rate_limit_per_minute: row.try_get("rate_limit_per_minute")?,
        allowed_clients: allowed.as_deref().map(parse_json_vec).transpose()?,
        auto_inbox: row.try_get("auto_inbox")?,
        default_clients: defaults.as_deref().map(parse_json_vec).transpose()?,
        created_at: row.try_get("created_at")?,
    })
}

impl Store {
    pub async fn create_account(&self, a: &NewAccount, now: i64) -> Result<Account> {
        let res = sqlx::query(
            "INSERT INTO accounts (api_key, password_hash, plan, monthly_test_limit,
                rate_limit_per_minute, allowed_clients, auto_inbox, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&a.api_key)
        .bind(&a.password_hash)
        .bind(a.plan.as_str())
        .bind(a.monthly_test_limit)
        .bind(a.rate_limit_per_minute)
        .bind(a.allowed_clients.as_deref().map(json_vec))
        .bind(&a.auto_inbox)
        .bind(now)
        .execute(&self.pool)
        .await;
        match res {
            Ok(_) => {}
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                return Err(StoreError::Conflict(format!(
                    "an account with API key {:?} or auto-inbox {:?} already exists",
                    a.api_key, a.auto_inbox
                )))
            }
            Err(e) => return Err(e.into()),
        }
        self.account_by_key(&a.api_key)
            .await?
            .ok_or_else(|| StoreError::Corrupt("account vanished after insert".into()))
    }

    pub async fn account_by_key(&self, api_key: &str) -> Result<Option<Account>> {
        let row = sqlx::query("SELECT * FROM accounts WHERE api_key = $1")
            .bind(api_key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(account_from_row).transpose()
    }

    pub async fn account_by_id(&self, id: i64) -> Result<Option<Account>> {
        let row = sqlx::query("SELECT * FROM accounts WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(account_from_row).transpose()
    }

    pub async fn account_by_auto_inbox(&self, local_part: &str) -> Result<Option<Account>> {
        let row = sqlx::query("SELECT * FROM accounts WHERE lower(auto_inbox) = lower($1)")
            .bind(local_part)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(account_from_row).transpose()
    }

    pub async fn accounts(&self) -> Result<Vec<Account>> {
        let rows = sqlx::query("SELECT * FROM accounts ORDER BY id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(account_from_row).collect()
    }

    /// Removes an account and, through the foreign keys, all of its tests. Returns false when no
    /// account had that key.
    pub async fn remove_account(&self, api_key: &str) -> Result<bool> {
        let res = sqlx::query("DELETE FROM accounts WHERE api_key = $1")
            .bind(api_key)
            .execute(&self.pool)
            .await?;
        Ok(res.rows_affected() > 0)
    }

    pub async fn set_default_clients(&self, account_id: i64, clients: &[String]) -> Result<()> {
        sqlx::query("UPDATE accounts SET default_clients = $1 WHERE id = $2")
            .bind(json_vec(clients))
            .bind(account_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
