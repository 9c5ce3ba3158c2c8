//! Bearer tokens and access levels: read-only < read-write < admin.
//! With no tokens configured authentication is off and every route is open.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use actix_web::http::header::AUTHORIZATION;
use actix_web::http::Method;
use actix_web::HttpRequest;

use crate::error::ApiError;

/// What a token may do. The order matters: a higher level includes the lower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    ReadOnly,
    ReadWrite,
    Admin,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::ReadOnly => "read-only",
            Level::ReadWrite => "read-write",
            Level::Admin => "admin",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Level {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "read-only" => Ok(Level::ReadOnly),
            "read-write" => Ok(Level::ReadWrite),
            "admin" => Ok(Level::Admin),
            other => Err(format!(
                "unknown access level {other:?} (expected read-only, read-write or admin)"
            )),
        }
    }
}

/// The configured tokens. Empty = authentication off.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Auth {
    tokens: HashMap<String, Level>,
}

// Never print the tokens themselves.
impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Auth({} tokens)", self.tokens.len())
    }
}

impl Auth {
    /// Parses `token:level,token:level`. Error messages never contain a token.
    pub fn parse(s: &str) -> Result<Auth, String> {
        let mut tokens = HashMap::new();
        for (i, entry) in s.split(',').map(str::trim).enumerate() {
            if entry.is_empty() {
                continue;
            }
            let (token, level) = entry
                .rsplit_once(':')
                .ok_or_else(|| format!("entry {} is not token:level", i + 1))?;
            if token.is_empty() {
                return Err(format!("entry {} has an empty token", i + 1));
            }
            // Which level was meant is not ours to guess.
            if tokens.insert(token.to_string(), level.parse()?).is_some() {
                return Err(format!("entry {} gives a token given before", i + 1));
            }
        }
        // Only separators (say, "${A},${B}" with both unset) must not turn
        // authentication off: that takes an empty value.
        if tokens.is_empty() && !s.trim().is_empty() {
            return Err("no token:level entry (an empty value turns authentication off)".into());
        }
        Ok(Auth { tokens })
    }

    pub fn is_enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// Checks a request's bearer token against the level a route needs.
    pub fn require(&self, req: &HttpRequest, needed: Level) -> Result<(), ApiError> {
        let header = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        self.check(header, needed)
    }

    /// The 401 for a request that may carry a body (any method but GET, HEAD
    /// and OPTIONS; every such route needs a token) from a caller without a
    /// known token, answered before the body is read (body::refuse_before_reading).
    /// Handlers read the whole body (up to PGCURSOR_MAX_BODY_BYTES) before
    /// they look at the token, so otherwise anyone who can reach the gateway
    /// could make it hold 8 MB per open connection: 40 slow uploads held
    /// 340 MB. The level a route needs is still the handler's to check (403).
    pub fn refuses_body_of(&self, req: &HttpRequest) -> Option<ApiError> {
        if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
            return None;
        }
        self.require(req, Level::ReadOnly).err()
    }

    /// The decision, given the raw Authorization header.
    pub fn check(&self, authorization: Option<&str>, needed: Level) -> Result<(), ApiError> {
        if !self.is_enabled() {
            return Ok(());
        }
        let token = authorization
            .and_then(bearer_token)
            .ok_or_else(|| ApiError::Unauthorized("missing bearer token".into()))?;
        let level = self
            .tokens
            .get(token)
            .ok_or_else(|| ApiError::Unauthorized("unknown bearer token".into()))?;
        if *level < needed {
            return Err(ApiError::Forbidden(format!(
                "this route needs {needed} access"
            )));
        }
        Ok(())
    }
}

/// `Bearer <token>`; the scheme is case-insensitive (RFC 7235).
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(r: Result<(), ApiError>) -> (u16, String) {
        match r {
            Ok(()) => (200, String::new()),
            Err(e) => (
                actix_web::ResponseError::status_code(&e).as_u16(),
                e.to_string(),
            ),
        }
    }

    #[test]
    fn parses_tokens_and_levels() {
        let auth = Auth::parse(" r:read-only, w:read-write ,a:admin,").unwrap();
        assert_eq!(auth.tokens.len(), 3);
        assert_eq!(auth.tokens["w"], Level::ReadWrite);
        assert!(!Auth::parse("").unwrap().is_enabled());
    }

    #[test]
    fn tokens_may_contain_colons() {
        let auth = Auth::parse("a:b:admin").unwrap();
        assert_eq!(auth.tokens["a:b"], Level::Admin);
    }

    #[test]
    fn rejects_bad_entries_without_echoing_the_token() {
        let e = Auth::parse("secret:superuser").unwrap_err();
        assert!(e.contains("superuser") && !e.contains("secret"), "{e}");
        assert!(Auth::parse("secret").unwrap_err().contains("token:level"));
        assert!(Auth::parse(":admin").is_err());
        let e = Auth::parse("secret:admin,secret:read-only").unwrap_err();
        assert!(e.contains("entry 2") && !e.contains("secret"), "{e}");
        for separators in [",", " , ", ",,"] {
            let e = Auth::parse(separators).unwrap_err();
            assert!(e.contains("no token:level entry"), "{separators:?}: {e}");
        }
        assert!(!Auth::parse("   ").unwrap().is_enabled(), "blank is empty");
    }

    #[test]
    fn levels_are_ordered() {
        assert!(Level::ReadOnly < Level::ReadWrite && Level::ReadWrite < Level::Admin);
    }

    #[test]
    fn check_decides_by_level() {
        let auth = Auth::parse("r:read-only,w:read-write,a:admin").unwrap();
        assert_eq!(
            status(auth.check(Some("Bearer w"), Level::ReadWrite)).0,
            200
        );
        assert_eq!(
            status(auth.check(Some("bearer a"), Level::ReadWrite)).0,
            200
        );
        assert_eq!(
            status(auth.check(Some("Bearer r"), Level::ReadWrite)),
            (403, "this route needs read-write access".into())
        );
        assert_eq!(
            status(auth.check(None, Level::ReadOnly)),
            (401, "missing bearer token".into())
        );
        assert_eq!(
            status(auth.check(Some("Basic abc"), Level::ReadOnly)),
            (401, "missing bearer token".into())
        );
        assert_eq!(
            status(auth.check(Some("Bearer nope"), Level::ReadOnly)),
            (401, "unknown bearer token".into())
        );
    }

    #[test]
    fn everything_is_open_without_tokens() {
        assert!(Auth::default().check(None, Level::Admin).is_ok());
    }
}
