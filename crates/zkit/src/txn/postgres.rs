//! [`PostgresResource`]: a PostgreSQL database as a two-phase-commit [`Resource`], with
//! `PREPARE TRANSACTION` (durable in the server, survives its restart and ours),
//! `COMMIT PREPARED` / `ROLLBACK PREPARED`, and in-doubt resolution from `pg_prepared_xacts`.
//! The server needs `max_prepared_transactions > 0`.
//!
//! The global transaction id is `zkit:<participant>:<txid>`, so several participants may share
//! one server. The payload is SQL: either the whole payload, or, when it is a JSON object, the
//! string under this participant's name (missing = nothing to do, still prepared).

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::Mutex;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

use super::decide::Vote;
use super::layout::check_name;
use super::participant::Resource;
use super::TxnError;

/// A PostgreSQL database as a participant's resource (see the module docs).
pub struct PostgresResource {
    name: String,
    url: String,
    client: Mutex<Option<Client>>,
}

impl std::fmt::Debug for PostgresResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresResource")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn pg(err: tokio_postgres::Error, what: &str) -> TxnError {
    TxnError::Resource(format!("postgres {what}: {err}"))
}

async fn connect(url: &str) -> Result<Client, TxnError> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| pg(e, "connect"))?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::debug!(error = %err, "postgres connection ended");
        }
    });
    Ok(client)
}

impl PostgresResource {
    /// Connects participant `name` to the database at `url`
    /// (`postgres://user@host:port/db` or a key=value string).
    ///
    /// # Errors
    /// [`TxnError::BadArguments`] for a bad name; [`TxnError::Resource`] when the connection
    /// fails or the server has `max_prepared_transactions = 0`.
    pub async fn connect(name: &str, url: &str) -> Result<PostgresResource, TxnError> {
        check_name("participant", name)?;
        let client = connect(url).await?;
        let row = client
            .query_one("SHOW max_prepared_transactions", &[])
            .await
            .map_err(|e| pg(e, "SHOW max_prepared_transactions"))?;
        let max: String = row.get(0);
        if max.trim() == "0" {
            return Err(TxnError::Resource(
                "postgres has max_prepared_transactions = 0; set it > 0".into(),
            ));
        }
        Ok(PostgresResource {
            name: name.to_string(),
            url: url.to_string(),
            client: Mutex::new(Some(client)),
        })
    }

    fn gid(&self, txid: &str) -> String {
        format!("zkit:{}:{txid}", self.name)
    }

    /// Runs `f` on the connection, reconnecting first if it was closed (server restart).
    async fn with_client<T>(
        &self,
        f: impl for<'c> FnOnce(&'c Client) -> BoxFuture<'c, Result<T, TxnError>>,
    ) -> Result<T, TxnError> {
        let mut guard = self.client.lock().await;
        if guard.as_ref().map_or(true, Client::is_closed) {
            *guard = Some(connect(&self.url).await?);
        }
        match guard.as_ref() {
            Some(client) => f(client).await,
            None => Err(TxnError::Resource("postgres: no connection".into())),
        }
    }

    fn sql_for(&self, payload: &[u8]) -> String {
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(payload) {
            return map
                .get(&self.name)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string();
        }
        String::from_utf8_lossy(payload).into_owned()
    }

    /// Finishes a prepared transaction with `verb` (`COMMIT PREPARED`/`ROLLBACK PREPARED`);
    /// an unknown gid is already finished (idempotent).
    async fn finish(&self, txid: &str, verb: &'static str) -> Result<(), TxnError> {
        check_name("transaction id", txid)?;
        // The gid is built from checked names ([A-Za-z0-9-_.:]), so quoting it is safe.
        let sql = format!("{verb} '{}'", self.gid(txid));
        self.with_client(move |client| {
            async move {
                match client.batch_execute(&sql).await {
                    Ok(()) => Ok(()),
                    Err(err) if err.code() == Some(&SqlState::UNDEFINED_OBJECT) => Ok(()),
                    Err(err) => Err(pg(err, verb)),
                }
            }
            .boxed()
        })
        .await
    }
}

impl Resource for PostgresResource {
    fn prepare<'a>(
        &'a self,
        txid: &'a str,
        payload: &'a [u8],
    ) -> BoxFuture<'a, Result<Vote, TxnError>> {
        async move {
            check_name("transaction id", txid)?;
            let sql = self.sql_for(payload);
            let prepare = format!("PREPARE TRANSACTION '{}'", self.gid(txid));
            self.with_client(move |client| {
                async move {
                    client
                        .batch_execute("BEGIN")
                        .await
                        .map_err(|e| pg(e, "BEGIN"))?;
                    if let Err(err) = client.batch_execute(&sql).await {
                        let _ = client.batch_execute("ROLLBACK").await;
                        return Ok(Vote::No(format!("SQL failed: {err}")));
                    }
                    match client.batch_execute(&prepare).await {
                        Ok(()) => Ok(Vote::Yes),
                        // Already prepared under this gid: a retry after a lost reply.
                        Err(err) if err.code() == Some(&SqlState::DUPLICATE_OBJECT) => {
                            let _ = client.batch_execute("ROLLBACK").await;
                            Ok(Vote::Yes)
                        }
                        Err(err) => {
                            let _ = client.batch_execute("ROLLBACK").await;
                            Ok(Vote::No(format!("PREPARE TRANSACTION failed: {err}")))
                        }
                    }
                }
                .boxed()
            })
            .await
        }
        .boxed()
    }

    fn commit<'a>(&'a self, txid: &'a str) -> BoxFuture<'a, Result<(), TxnError>> {
        self.finish(txid, "COMMIT PREPARED").boxed()
    }

    fn abort<'a>(&'a self, txid: &'a str) -> BoxFuture<'a, Result<(), TxnError>> {
        self.finish(txid, "ROLLBACK PREPARED").boxed()
    }

    fn in_doubt(&self) -> BoxFuture<'_, Result<Vec<String>, TxnError>> {
        let prefix = format!("zkit:{}:", self.name);
        async move {
            self.with_client(move |client| {
                async move {
                    let rows = client
                        .query(
                            "SELECT gid FROM pg_prepared_xacts \
                             WHERE database = current_database() AND starts_with(gid, $1) \
                             ORDER BY prepared",
                            &[&prefix],
                        )
                        .await
                        .map_err(|e| pg(e, "pg_prepared_xacts"))?;
                    Ok(rows
                        .iter()
                        .filter_map(|row| {
                            let gid: String = row.get(0);
                            gid.strip_prefix(&prefix).map(str::to_string)
                        })
                        .collect())
                }
                .boxed()
            })
            .await
        }
        .boxed()
    }
}
