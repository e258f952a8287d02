//! Every store-backed test on both backends, declared once.

/// Runs each named `async fn(store::Backend)` as two tests, `NAME::sqlite` and `NAME::postgres`,
/// each on a two-thread runtime (a handler that blocks a thread must not stall the loops it is
/// tested against). The calling crate depends on `store` (feature `testing`) and `tokio`.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(::store::Backend::Sqlite).await
            }
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(::store::Backend::Postgres).await
            }
        }
    )*};
}
