//! (the sidecar) AWS Signature Version 4 (the `Authorization` header of every CloudWatch Logs
//! call), on ring's HMAC-SHA256 and SHA-256, which rustls already links.
//!
//! The algorithm, step by step, is AWS's "Create a signed AWS API request"
//! (<https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html>): a canonical
//! request, a string to sign over its hash, a key derived from the secret by the date, region
//! and service, and the signature over the string. The unit tests hold it to AWS's published
//! test suite (aws-sig-v4-test-suite); tests/support/cwproxy.py checks every request hooklog
//! sends against botocore's signer.

use ring::{digest, hmac};

/// The algorithm's name, in the string to sign and the header.
const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// The credentials a request is signed with.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `AWS_ACCESS_KEY_ID` or the temporary key's id.
    pub access_key_id: String,
    /// The secret the signing key is derived from.
    pub secret_access_key: String,
    /// A temporary key's session token, sent (and signed) as `X-Amz-Security-Token`.
    pub session_token: Option<String>,
    /// When a temporary key expires, in ms since the epoch; `None` for long-term keys.
    pub expires_ms: Option<i64>,
}

impl std::fmt::Debug for Credentials {
    /// Names the key, never the secret or the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("expires_ms", &self.expires_ms)
            .finish_non_exhaustive()
    }
}

/// `YYYYMMDDTHHMMSSZ` (the `X-Amz-Date` form) for `ms` since the epoch, UTC.
pub fn amz_date(ms: i64) -> String {
    let iso = crate::timefmt::rfc3339_ms(ms);
    // YYYY-MM-DDTHH:MM:SS.mmmZ: keep the digits and the T, drop the milliseconds.
    let mut out = String::with_capacity(16);
    for &b in &iso[..19] {
        if b != b'-' && b != b':' {
            out.push(char::from(b));
        }
    }
    out.push('Z');
    out
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> hmac::Tag {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
}

/// One request to sign. `headers` must hold every header to sign, `host` and `x-amz-date`
/// (and `x-amz-security-token` with a temporary key) included: [`sign`] signs all of them.
pub struct Request<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The path, already in canonical (URI-encoded) form: `/` for every call hooklog makes.
    pub path: &'a str,
    /// The canonical query string (sorted, encoded), empty for none.
    pub query: &'a str,
    /// Name and value of each header, in any case and order; repeated names are joined.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub payload: &'a [u8],
}

/// A header value as SigV4 canonicalises it: trimmed, runs of spaces made one.
fn canonical_value(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The canonical request and the `SignedHeaders` list.
pub fn canonical_request(req: &Request<'_>) -> (String, String) {
    let mut headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), canonical_value(v)))
        .collect();
    // Stable: repeated names keep their order, joined with commas.
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    let mut joined: Vec<(String, String)> = Vec::with_capacity(headers.len());
    for (k, v) in headers {
        match joined.last_mut() {
            Some(last) if last.0 == k => {
                last.1.push(',');
                last.1.push_str(&v);
            }
            _ => joined.push((k, v)),
        }
    }
    let signed: Vec<&str> = joined.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let mut out = String::new();
    out.push_str(req.method);
    out.push('\n');
    out.push_str(req.path);
    out.push('\n');
    out.push_str(req.query);
    out.push('\n');
    for (k, v) in &joined {
        out.push_str(k);
        out.push(':');
        out.push_str(v);
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&signed);
    out.push('\n');
    out.push_str(&sha256_hex(req.payload));
    (out, signed)
}

/// The `Authorization` header's value for `req`, signed at `date` (`YYYYMMDDTHHMMSSZ`, the
/// request's own `x-amz-date`) for `region` and `service`.
pub fn sign(
    creds: &Credentials,
    region: &str,
    service: &str,
    date: &str,
    req: &Request<'_>,
) -> String {
    let day = date.get(..8).unwrap_or(date);
    let scope = format!("{day}/{region}/{service}/aws4_request");
    let (canonical, signed) = canonical_request(req);
    let to_sign = format!(
        "{ALGORITHM}\n{date}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let secret = format!("AWS4{}", creds.secret_access_key);
    let k_date = hmac_sha256(secret.as_bytes(), day.as_bytes());
    let k_region = hmac_sha256(k_date.as_ref(), region.as_bytes());
    let k_service = hmac_sha256(k_region.as_ref(), service.as_bytes());
    let k_signing = hmac_sha256(k_service.as_ref(), b"aws4_request");
    let signature = hex(hmac_sha256(k_signing.as_ref(), to_sign.as_bytes()).as_ref());
    format!(
        "{ALGORITHM} Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
        creds.access_key_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test suite's key (aws-sig-v4-test-suite, "Credentials and dates").
    fn suite() -> Credentials {
        Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
            expires_ms: None,
        }
    }

    const HOST: (&str, &str) = ("Host", "example.amazonaws.com");
    const DATE: (&str, &str) = ("X-Amz-Date", "20150830T123600Z");

    fn signed(method: &str, query: &str, headers: &[(&str, &str)], payload: &[u8]) -> String {
        let req = Request {
            method,
            path: "/",
            query,
            headers,
            payload,
        };
        sign(&suite(), "us-east-1", "service", "20150830T123600Z", &req)
    }

    fn authz(signed_headers: &str, signature: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders={signed_headers}, Signature={signature}"
        )
    }

    #[test]
    fn get_vanilla() {
        assert_eq!(
            signed("GET", "", &[HOST, DATE], b""),
            authz(
                "host;x-amz-date",
                "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
            )
        );
    }

    #[test]
    fn post_vanilla_and_post_vanilla_query() {
        assert_eq!(
            signed("POST", "", &[HOST, DATE], b""),
            authz(
                "host;x-amz-date",
                "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
            )
        );
        assert_eq!(
            signed("POST", "Param1=value1", &[HOST, DATE], b""),
            authz(
                "host;x-amz-date",
                "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"
            )
        );
    }

    #[test]
    fn post_x_www_form_urlencoded() {
        let ct = ("Content-Type", "application/x-www-form-urlencoded");
        assert_eq!(
            signed("POST", "", &[ct, HOST, DATE], b"Param1=value1"),
            authz(
                "content-type;host;x-amz-date",
                "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"
            )
        );
        // The canonical request the suite publishes for it.
        let req = Request {
            method: "POST",
            path: "/",
            query: "",
            headers: &[ct, HOST, DATE],
            payload: b"Param1=value1",
        };
        assert_eq!(
            canonical_request(&req).0,
            "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
        );
    }

    #[test]
    fn header_names_and_values_are_canonicalised() {
        // post-header-key-case: the name is lower-cased; post-header-value-case: the value is not.
        assert_eq!(
            signed("POST", "", &[HOST, ("MY-HEADER1", "value1"), DATE], b""),
            authz(
                "host;my-header1;x-amz-date",
                "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"
            )
        );
        assert_eq!(
            signed("POST", "", &[HOST, ("My-Header1", "VALUE1"), DATE], b""),
            authz(
                "host;my-header1;x-amz-date",
                "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"
            )
        );
        // get-header-value-trim: trimmed, inner runs of spaces made one (quotes or not).
        assert_eq!(
            signed(
                "GET",
                "",
                &[
                    HOST,
                    ("My-Header1", " value1"),
                    ("My-Header2", " \"a   b   c\""),
                    DATE
                ],
                b""
            ),
            authz(
                "host;my-header1;my-header2;x-amz-date",
                "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"
            )
        );
    }

    #[test]
    fn amz_date_is_the_utc_second() {
        // 2015-08-30T12:36:00.999Z
        assert_eq!(amz_date(1_440_938_160_999), "20150830T123600Z");
        assert_eq!(amz_date(0), "19700101T000000Z");
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let mut c = suite();
        c.session_token = Some("TOKEN-SECRET".into());
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("EXAMPLEKEY") && !shown.contains("TOKEN-SECRET"),
            "{shown}"
        );
    }
}
