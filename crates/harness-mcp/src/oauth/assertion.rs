//! `private_key_jwt` (RFC 7523 §2.2, SEP-1046): the client proves itself with a short-lived
//! JWT signed by its private key (ES256, a P-256 key in PKCS#8 PEM), instead of a secret.

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

/// The one signing algorithm offered.
pub(crate) const ALGORITHM: &str = "ES256";
/// How long an assertion is good for, in seconds.
const LIFETIME: u64 = 300;

/// A client's signing key. Its Debug shows nothing of it.
pub(crate) struct SigningKey(EcdsaKeyPair);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(hidden)")
    }
}

impl SigningKey {
    /// The key of a `-----BEGIN PRIVATE KEY-----` PEM (PKCS#8, P-256); errors never quote it.
    pub(crate) fn from_pem(pem: &str) -> Result<Self, String> {
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
        let der =
            STANDARD.decode(body).map_err(|_| "it is not a PEM (base64 between BEGIN and END lines)".to_owned())?;
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der)
            .map(Self)
            .map_err(|e| format!("it is not a PKCS#8 P-256 private key for ES256 ({e})"))
    }

    /// A client assertion for `client_id`, for the authorization server `audience`, made `now`.
    pub(crate) fn assertion(&self, client_id: &str, audience: &str, now: u64) -> Result<String, String> {
        let rng = SystemRandom::new();
        let mut jti = [0u8; 16];
        rng.fill(&mut jti).map_err(|_| "no randomness for the assertion's jti".to_owned())?;
        let header = serde_json::json!({"alg": ALGORITHM, "typ": "JWT"});
        let claims = serde_json::json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + LIFETIME,
            "jti": URL_SAFE_NO_PAD.encode(jti),
        });
        let signed =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature =
            self.0.sign(&rng, signed.as_bytes()).map_err(|_| "the assertion could not be signed".to_owned())?;
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref())))
    }
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, KeyPair, UnparsedPublicKey};

    use super::*;

    #[test]
    fn an_assertion_is_a_jwt_its_key_verifies() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem =
            format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", STANDARD.encode(pkcs8.as_ref()));
        let key = SigningKey::from_pem(&pem).unwrap();
        let jwt = key.assertion("me", "https://as.example", 100).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            (&claims["iss"], &claims["sub"], &claims["aud"], &claims["exp"]),
            (&"me".into(), &"me".into(), &"https://as.example".into(), &400.into())
        );
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.0.public_key().as_ref().to_vec());
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        assert!(public.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature).is_ok());
        assert!(SigningKey::from_pem("not a key").is_err());
        assert!(format!("{key:?}").contains("hidden"));
    }
}
