//! The table application's PostgreSQL side: one connection per
//! application process, opened on the first request that needs it and kept
//! across requests (the seeds' persistent FastCGI application, Figure 1,
//! keeps its DBI handle the same way), with its prepared statements.
//!
//! The blocking driver runs each request on a thread of its own; they share
//! the one connection through tokio-postgres's `Client`, which pipelines
//! their queries on it. Its I/O runs on a current-thread tokio runtime
//! driven by one thread of this module (the runtime's `block_on` on that
//! thread drives the I/O; request threads wait on tasks spawned onto it).
//! A connection the server closed is opened again by the next request.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio_postgres::{Client, Statement};

/// Longest a connect or a query may take before the request gets a 500
/// (a stuck server holds no request thread forever).
const TIMEOUT: Duration = Duration::from_secs(30);

/// The process's PostgreSQL connection.
pub struct Pg {
    conninfo: String,
    rt: Handle,
    /// The live connection, if any. Held while connecting, so that
    /// concurrent first requests share one connection.
    conn: Mutex<Option<Arc<Conn>>>,
}

struct Conn {
    client: Client,
    /// Prepared statements by SQL text (a handful: one per table).
    statements: Mutex<HashMap<String, Statement>>,
}

impl Pg {
    /// Checks the connection string and starts the I/O thread; connects
    /// on the first query.
    pub fn new(conninfo: String) -> Result<Pg, String> {
        conninfo
            .parse::<tokio_postgres::Config>()
            .map_err(|e| format!("postgres: {e}"))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("postgres: runtime: {e}"))?;
        let handle = rt.handle().clone();
        std::thread::Builder::new()
            .name("postgres-io".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .map_err(|e| format!("postgres: thread: {e}"))?;
        Ok(Pg {
            conninfo,
            rt: handle,
            conn: Mutex::new(None),
        })
    }

    /// Runs `f` on the I/O thread's runtime and waits for it, for at most
    /// [`TIMEOUT`].
    fn run<T: Send + 'static>(
        &self,
        f: impl Future<Output = Result<T, String>> + Send + 'static,
    ) -> Result<T, String> {
        let task = self.rt.spawn(async move {
            tokio::time::timeout(TIMEOUT, f)
                .await
                .unwrap_or_else(|_| Err(format!("postgres: no answer in {TIMEOUT:?}")))
        });
        self.rt
            .block_on(task)
            .map_err(|e| format!("postgres: task: {e}"))?
    }

    fn conn(&self) -> Result<Arc<Conn>, String> {
        let mut slot = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = slot.as_ref().filter(|c| !c.client.is_closed()) {
            return Ok(c.clone());
        }
        let conninfo = self.conninfo.clone();
        let client = self.run(async move {
            let (client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
                .await
                .map_err(|e| format!("postgres: connecting: {}", describe(&e)))?;
            // The connection's I/O, until the server closes it (the next
            // request then connects again) or the process ends.
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    eprintln!(
                        "stoa demo-app[{}]: postgres: connection closed: {e}",
                        std::process::id()
                    );
                }
            });
            Ok(client)
        })?;
        let c = Arc::new(Conn {
            client,
            statements: Mutex::new(HashMap::new()),
        });
        *slot = Some(c.clone());
        Ok(c)
    }

    /// `SELECT * FROM table` (text columns), each row's three cells.
    pub fn select(&self, table: &'static str) -> Result<Vec<[String; 3]>, String> {
        let c = self.conn()?;
        self.run(async move {
            let stmt = c.statement(&format!("SELECT * FROM {table}")).await?;
            let rows = c.client.query(&stmt, &[]).await.map_err(|e| describe(&e))?;
            rows.iter()
                .map(|r| {
                    let cell = |i: usize| r.try_get::<_, String>(i).map_err(|e| describe(&e));
                    Ok([cell(0)?, cell(1)?, cell(2)?])
                })
                .collect()
        })
    }

    /// `INSERT INTO comments VALUES ($1, $2, $3)`.
    pub fn insert(&self, row: [String; 3]) -> Result<u64, String> {
        let c = self.conn()?;
        self.run(async move {
            let stmt = c
                .statement("INSERT INTO comments VALUES ($1, $2, $3)")
                .await?;
            c.client
                .execute(&stmt, &[&row[0], &row[1], &row[2]])
                .await
                .map_err(|e| describe(&e))
        })
    }
}

impl Conn {
    async fn statement(&self, sql: &str) -> Result<Statement, String> {
        let known = self
            .statements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(sql)
            .cloned();
        if let Some(s) = known {
            return Ok(s);
        }
        let s = self.client.prepare(sql).await.map_err(|e| describe(&e))?;
        self.statements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sql.to_owned(), s.clone());
        Ok(s)
    }
}

/// The error's text with the server's detail (tokio-postgres's Display
/// says only "db error").
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "postgres: {}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        ),
        None => format!("postgres: {e}"),
    }
}
