//! Integration tests of the HTTP interface, over real HTTP against `mailproof serve`.

mod support;

mod auth;
mod auto_inbox;
mod checks;
mod cli;
mod clients;
mod code_analysis;
mod content;
mod durability;
mod email_tests;
mod emulation;
mod engine_processes;
mod faults;
mod filters_anywhere;
mod hardening_http;
mod hostile_clients;
mod links;
mod lists;
mod metrics;
mod postgres_backend;
mod protocol;
mod rendering;
mod reprocess_quota;
mod roles;
mod s3_storage;
mod spam_e2e;
mod spam_tests;
mod ssrf;
mod tenancy;
mod visual_diff;
mod web_pages_ui;
mod web_ui;
mod web_why;
mod web_why_ui;
mod webhooks;
