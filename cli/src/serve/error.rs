//! OpenAI-style error answers: `{"error": {"message", "type", "param", "code"}}` with the
//! HTTP status, and `Retry-After` where waiting helps.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// OpenAI's error type (`invalid_request_error`, `authentication_error`, …).
    pub kind: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// The request field at fault.
    pub param: Option<String>,
    /// A machine-readable code (`context_length_exceeded`, …).
    pub code: Option<&'static str>,
    /// Seconds to wait before retrying (503).
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, kind, message: message.into(), param: None, code: None, retry_after: None }
    }
    /// 400: the request is wrong.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }
    /// 400 about one field.
    pub fn bad_param(param: &str, message: impl Into<String>) -> ApiError {
        ApiError { param: Some(param.to_string()), ..ApiError::bad_request(message) }
    }
    /// 401: no or a wrong API key.
    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid or missing API key (Authorization: Bearer KEY)",
        )
    }
    /// 404: no such endpoint.
    pub fn not_found(path: &str) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", format!("no endpoint {path}"))
    }
    /// 408: the body did not arrive in time.
    pub fn timeout(secs: u64) -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            format!("the request body did not arrive within {secs} s"),
        )
    }
    /// 413: the body is over the limit.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the request body is over {limit} bytes"),
        )
    }
    /// 501: the server does not do this (llama-server's `not_supported_error`).
    pub fn not_supported(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_IMPLEMENTED, "not_supported_error", message)
    }
    /// 503: try again later.
    pub fn unavailable(message: impl Into<String>, retry_after: u64) -> ApiError {
        ApiError {
            retry_after: Some(retry_after),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable_error", message)
        }
    }
    /// 500: the server failed.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r =
            (self.status, [(header::CONTENT_TYPE, "application/json")], self.body().to_string()).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}
