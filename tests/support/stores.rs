//! The databases the durable tests run against.
#![allow(dead_code)]

use std::path::Path;

/// The stores the durable tests run against: a fresh SQLite file, and a fresh schema of the
/// PostgreSQL server at `DATABASE_URL` (see [`postgres`]).
pub async fn store_urls(test: &str) -> Vec<(&'static str, String)> {
    let mut urls = vec![("sqlite", sqlite(test))];
    if let Some(url) = postgres(test).await {
        urls.push(("postgres", url));
    }
    urls
}

/// A test that the PostgreSQL server at `DATABASE_URL` answers, ignored when `DATABASE_URL` was
/// not set at build time: each test file of the durable stores has one, so that the summary
/// counts the skipped PostgreSQL halves instead of passing them silently.
#[allow(unused_macros)] // by the test files of the durable stores only
macro_rules! postgresql_answers_test {
    () => {
        #[tokio::test]
        #[cfg_attr(
            no_database_url,
            ignore = "DATABASE_URL is not set: this file's tests ran on SQLite and memory only"
        )]
        async fn postgresql_answers() {
            stores::postgresql_answers().await;
        }
    };
}
#[allow(unused_imports)] // by the test files of the durable stores only
pub(crate) use postgresql_answers_test;

/// The PostgreSQL server at `DATABASE_URL` answers.
pub async fn postgresql_answers() {
    let url =
        std::env::var("DATABASE_URL").expect("DATABASE_URL was set when the tests were built");
    postgres_schema(&url, "answers").await;
}

/// The URL of a fresh SQLite file.
pub fn sqlite(test: &str) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stores");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{test}-{}.db", uuid::Uuid::now_v7()));
    format!("sqlite://{}", file.display())
}

/// The URL of a fresh schema of the PostgreSQL server at `DATABASE_URL`. Without
/// `DATABASE_URL`, `None`: the PostgreSQL part of `test` is skipped, loudly, and refused in CI.
pub async fn postgres(test: &str) -> Option<String> {
    match std::env::var("DATABASE_URL") {
        Ok(url) => Some(postgres_schema(&url, test).await),
        Err(_) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "DATABASE_URL must be set in CI: the PostgreSQL store tests would be skipped"
            );
            eprintln!("SKIPPED: {test} on PostgreSQL (set DATABASE_URL to run it)");
            None
        }
    }
}

/// A store several instances share: a fresh [`postgres`] schema, else (no `DATABASE_URL`) a
/// fresh [`sqlite`] file.
pub async fn shared(test: &str) -> String {
    match postgres(test).await {
        Some(url) => url,
        None => sqlite(test),
    }
}

/// A URL of `url`'s database whose connections work in a new, empty schema.
pub async fn postgres_schema(url: &str, test: &str) -> String {
    use sqlx::Connection;
    let test: String = test
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let schema = format!("t_{test}_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("DATABASE_URL {url} is not reachable: {e}"));
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut conn)
        .await
        .unwrap();
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}
