//! The error answer of every route, the API's and the peers' alike: a status, a stable
//! snake_case code and a human message, sent as the contract's [`ErrorBody`]
//! (`{"error": {"code": "...", "message": "..."}}`), and the request limits that produce some
//! of them. A low module: the transport, the engines and the API all answer with it.

use std::time::Duration;

use axum::extract::rejection::{BytesRejection, JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use electd_client::ErrorBody;

/// Largest request body any route accepts.
pub const BODY_LIMIT: usize = 1 << 20;

/// Every request is answered within this time (body reading included), or gets 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// An API error: status, stable snake_case code, human message.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// A `WWW-Authenticate` challenge to send with a 401 (RFC 9110, 11.6.1).
    pub challenge: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            challenge: None,
        }
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn unauthorized(code: &'static str, message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::UNAUTHORIZED, code, message)
    }
    pub fn conflict(code: &'static str, message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 413 with the JSON error body.
    pub fn too_large() -> ApiError {
        ApiError::too_large_for(BODY_LIMIT)
    }

    /// 413: the body is larger than `limit` bytes (a peer route's own limit).
    pub fn too_large_for(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("request body exceeds {limit} bytes"),
        )
    }

    /// 408 with the JSON error body.
    pub fn request_timeout() -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request was not complete within {} ms",
                REQUEST_TIMEOUT.as_millis()
            ),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status, Json(ErrorBody::new(self.code, self.message))).into_response();
        if let Some(challenge) = self.challenge {
            res.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static(challenge),
            );
        }
        res
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        match r {
            JsonRejection::JsonDataError(e) => ApiError::bad_request("invalid_body", e.body_text()),
            JsonRejection::JsonSyntaxError(e) => {
                ApiError::bad_request("malformed_json", e.body_text())
            }
            JsonRejection::MissingJsonContentType(e) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                e.body_text(),
            ),
            JsonRejection::BytesRejection(e) => e.into(),
            other => ApiError::bad_request("bad_request", other.body_text()),
        }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(e: BytesRejection) -> ApiError {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large()
        } else {
            ApiError::bad_request("bad_body", e.body_text())
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> ApiError {
        ApiError::bad_request("invalid_query", r.body_text())
    }
}
