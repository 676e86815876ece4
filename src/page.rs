//! `GET /`: the status page. One HTML file (`page.html`: HTML, CSS and JavaScript, no build
//! step, no CDN) embedded in the binary. It shows the whole cluster live, from the browser:
//! one lane per member with role, term, leader and claim left, the recent role changes from
//! every member's `GET /v1/watch` stream, a 60 s timeline of roles, and this node's fault set.
//! The read routes allow any origin (`api.rs`), so that the page served by one node can read
//! the others.

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

const PAGE: &str = include_str!("page.html");

pub(crate) async fn get_page() -> Response {
    ([(header::CACHE_CONTROL, "no-cache")], Html(PAGE)).into_response()
}
