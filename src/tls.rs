//! amqps:// on the native socket: a rustls client session between the driver and its TCP
//! socket. Ciphertext read from the socket is decrypted into the core's read buffer; the
//! core's output is encrypted and written. Because the driver reads what the kernel holds
//! before it reports a socket error, a server's last words (connection.close, then a reset)
//! are heard over TLS as over TCP.
//!
//! Trust is Node's: the chain is verified here against the roots JS gives (Node's own store,
//! or the `ca` option); the host name is checked in JS after the handshake, by
//! `tls.checkServerIdentity` or the user's own function, as Node checks it, so that its
//! errors are Node's. A chain that does not verify is reported with the code Node gives it.

use crate::transport::TcpSocket;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, Error, OtherError, RootCertStore, SignatureScheme};
use std::io::{self, BufRead, Read, Write};
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

/// Ciphertext rustls may hold beyond what the socket took: the core keeps the rest of its
/// output (and so its backpressure) while this much waits.
const SENDABLE_LIMIT: usize = 64 * 1024;

/// What a session is made with, from the connect's options (lib/native_socket.js).
pub struct TlsSettings {
    /// The name sent (SNI) and the session's: a host name or an IP address.
    pub server_name: String,
    /// Trusted roots, each a PEM text (of one or more certificates) or one DER certificate.
    pub roots: Vec<Vec<u8>>,
    /// `rejectUnauthorized` (Node's default): a chain that does not verify fails the handshake.
    /// If false, it is verified all the same and its failure kept (`chain_failure`), as Node
    /// keeps it for `authorized` and `authorizationError`.
    pub reject_unauthorized: bool,
    /// A client certificate chain and its key, both PEM.
    pub client_auth: Option<(Vec<u8>, Vec<u8>)>,
    pub tls12: bool,
    pub tls13: bool,
}

/// A TLS failure as JS is told it: Node's code for it, and words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFailure {
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for TlsFailure {}

/// The TLS failure an I/O error carries, if it is one.
pub fn tls_failure(e: &io::Error) -> Option<&TlsFailure> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<TlsFailure>())
}

/// One of OpenSSL's verify codes that rustls has no error for (see `unknown_issuer`).
#[derive(Debug)]
struct VerifyCode(&'static str);

impl std::fmt::Display for VerifyCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for VerifyCode {}

/// A chain that leads to no trusted root, told apart as OpenSSL tells it: a self-signed
/// certificate alone, one in the chain the server sent, or neither.
fn unknown_issuer(end_entity: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>]) -> Error {
    let code = if is_self_signed(end_entity) {
        "DEPTH_ZERO_SELF_SIGNED_CERT"
    } else if intermediates.iter().any(|cert| is_self_signed(cert)) {
        "SELF_SIGNED_CERT_IN_CHAIN"
    } else {
        "UNABLE_TO_VERIFY_LEAF_SIGNATURE"
    };
    Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(VerifyCode(code)))))
}

/// Whether a certificate names itself as its issuer (its signature is not checked: this only
/// picks the words of a failure already found).
fn is_self_signed(cert: &[u8]) -> bool {
    issuer_and_subject(cert).is_some_and(|(issuer, subject)| issuer == subject)
}

/// The issuer and subject Names of a DER certificate, as their encoded bytes.
fn issuer_and_subject(cert: &[u8]) -> Option<(&[u8], &[u8])> {
    let (certificate, _) = der_element(cert)?;
    let (tbs, _) = der_element(der_contents(certificate)?)?;
    let mut rest = der_contents(tbs)?;
    let mut next = || {
        let (element, after) = der_element(rest)?;
        rest = after;
        Some(element)
    };
    // TBSCertificate: [0] version (absent in v1), serialNumber, signature, issuer, validity,
    // subject, ...
    let mut serial = next()?;
    if serial.first() == Some(&0xa0) {
        serial = next()?;
    }
    let _ = (serial, next()?);
    let issuer = next()?;
    let _validity = next()?;
    let subject = next()?;
    Some((issuer, subject))
}

/// The first DER element of `bytes` (tag, length and contents) and what follows it.
fn der_element(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let first = *bytes.get(1)?;
    let (header, length) = match first {
        0..=0x7f => (2, usize::from(first)),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let length = bytes.get(2..2 + n)?.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            (2 + n, length)
        }
        _ => return None,
    };
    let end = header.checked_add(length)?;
    (end <= bytes.len()).then(|| bytes.split_at(end))
}

/// The contents of a DER element.
fn der_contents(element: &[u8]) -> Option<&[u8]> {
    let first = *element.get(1)?;
    let header = if first < 0x80 { 2 } else { 2 + usize::from(first & 0x7f) };
    element.get(header..)
}

/// Node's code for a rustls error (OpenSSL's verify codes for a chain, EPROTO for the rest).
fn node_code(error: &Error) -> &'static str {
    match error {
        Error::InvalidCertificate(cert) => match cert {
            CertificateError::Other(OtherError(other)) => other.downcast_ref::<VerifyCode>().map_or("CERT_REJECTED", |code| code.0),
            CertificateError::UnknownIssuer => "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => "CERT_HAS_EXPIRED",
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => "CERT_NOT_YET_VALID",
            CertificateError::Revoked => "CERT_REVOKED",
            CertificateError::BadSignature => "CERT_SIGNATURE_FAILURE",
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => "INVALID_PURPOSE",
            _ => "CERT_REJECTED",
        },
        _ => "EPROTO",
    }
}

/// Node's (OpenSSL's) words for the verify codes above; rustls's for the rest.
fn node_message(code: &'static str, error: &Error) -> String {
    match code {
        "UNABLE_TO_VERIFY_LEAF_SIGNATURE" => "unable to verify the first certificate".into(),
        "SELF_SIGNED_CERT_IN_CHAIN" => "self-signed certificate in certificate chain".into(),
        "DEPTH_ZERO_SELF_SIGNED_CERT" => "self-signed certificate".into(),
        "CERT_HAS_EXPIRED" => "certificate has expired".into(),
        "CERT_NOT_YET_VALID" => "certificate is not yet valid".into(),
        "CERT_REVOKED" => "certificate revoked".into(),
        "CERT_SIGNATURE_FAILURE" => "certificate signature failure".into(),
        "INVALID_PURPOSE" => "unsupported certificate purpose".into(),
        "CERT_REJECTED" => "certificate rejected".into(),
        _ => error.to_string(),
    }
}

/// A rustls error as Node would report it.
fn failure_of(error: &Error) -> TlsFailure {
    let code = node_code(error);
    TlsFailure { code, message: node_message(code, error) }
}

fn tls_error(error: Error) -> io::Error {
    io::Error::other(failure_of(&error))
}

/// The certificates of PEM texts (each may hold several) and DER certificates.
fn certificates(items: &[Vec<u8>]) -> Vec<CertificateDer<'static>> {
    let mut found = Vec::new();
    for item in items {
        if item.windows(10).any(|w| w == b"-----BEGIN") {
            found.extend(CertificateDer::pem_slice_iter(item).filter_map(Result::ok));
        } else {
            found.push(CertificateDer::from(item.clone()));
        }
    }
    found
}

/// Verifies the chain to a trusted root and the handshake's signatures; the name is JS's. A
/// chain that fails is refused, or with `rejectUnauthorized: false` taken and its failure kept
/// in `failure` (the handshake's signatures still verified: they prove the server holds the
/// certificate's key).
#[derive(Debug)]
struct ChainOnly {
    /// None when no root is trusted (a `ca` that holds none): no chain verifies.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
    refuse: bool,
    failure: Arc<Mutex<Option<TlsFailure>>>,
}

impl ChainOnly {
    fn verify_chain(&self, end_entity: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>], server_name: &ServerName<'_>, ocsp: &[u8], now: UnixTime) -> Result<ServerCertVerified, Error> {
        let Some(webpki) = &self.webpki else { return Err(unknown_issuer(end_entity, intermediates)) };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            // webpki checks the name only once the chain is good.
            Err(Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => Ok(ServerCertVerified::assertion()),
            // webpki tries the signature of every root of the issuer's name. OpenSSL first
            // matches the key identifiers, so a root of that name with another key (a CA made
            // again under its old name, the common case) is no issuer to it: the chain's issuer
            // is unknown. A signature broken under the right key, which OpenSSL calls
            // CERT_SIGNATURE_FAILURE, is reported so too: refused all the same.
            Err(Error::InvalidCertificate(CertificateError::UnknownIssuer | CertificateError::BadSignature)) => Err(unknown_issuer(end_entity, intermediates)),
            verdict => verdict,
        }
    }
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(&self, end_entity: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>], server_name: &ServerName<'_>, ocsp: &[u8], now: UnixTime) -> Result<ServerCertVerified, Error> {
        match self.verify_chain(end_entity, intermediates, server_name, ocsp, now) {
            Err(error) if !self.refuse => {
                *self.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(failure_of(&error));
                Ok(ServerCertVerified::assertion())
            }
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// The session's configuration; `chain_failure` is where a chain taken under
/// `rejectUnauthorized: false` leaves why it did not verify.
fn config(settings: &TlsSettings, chain_failure: &Arc<Mutex<Option<TlsFailure>>>) -> Result<ClientConfig, String> {
    // ring: it cross-builds for every target of build:cross (aws-lc-rs, which rustls now
    // prefers for its post-quantum key exchange, needs cmake and more per target).
    #[allow(deprecated)]
    let provider = Arc::new(ring::default_provider());
    let versions: Vec<_> = [(settings.tls12, &rustls::version::TLS12), (settings.tls13, &rustls::version::TLS13)].into_iter().filter_map(|(on, v)| on.then_some(v)).collect();
    let builder = ClientConfig::builder_with_provider(provider.clone()).with_protocol_versions(&versions).map_err(|e| e.to_string())?;
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(certificates(&settings.roots));
    let webpki = if roots.is_empty() {
        None
    } else {
        Some(WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build().map_err(|e| e.to_string())?)
    };
    let verifier = Arc::new(ChainOnly { webpki, provider, refuse: settings.reject_unauthorized, failure: chain_failure.clone() });
    let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
    match &settings.client_auth {
        None => Ok(builder.with_no_client_auth()),
        Some((chain, key)) => {
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("the client key: {e}"))?;
            builder.with_client_auth_cert(certificates(std::slice::from_ref(chain)), key).map_err(|e| e.to_string())
        }
    }
}

/// One connection's TLS session.
pub struct TlsSession {
    session: ClientConnection,
    /// The handshake completed and the driver has told JS.
    told_established: bool,
    /// Why the server's chain did not verify, when it was taken all the same.
    chain_failure: Arc<Mutex<Option<TlsFailure>>>,
}

/// `read_tls`'s and `write_tls`'s view of the socket.
struct Socket<'a>(&'a mut TcpSocket);

impl Read for Socket<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read_initialised(buf)
    }
}

impl Write for Socket<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    // rustls hands every record it holds at once: they leave in one write, as plaintext does.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsSession {
    /// A session with these settings; an error says what in them is wrong.
    pub fn new(settings: &TlsSettings) -> Result<TlsSession, String> {
        let name = ServerName::try_from(settings.server_name.clone()).map_err(|e| format!("servername {:?}: {e}", settings.server_name))?;
        let chain_failure = Arc::default();
        let mut session = ClientConnection::new(Arc::new(config(settings, &chain_failure)?), name).map_err(|e| e.to_string())?;
        session.set_buffer_limit(Some(SENDABLE_LIMIT));
        Ok(TlsSession { session, told_established: false, chain_failure })
    }

    /// Why the server's chain did not verify (`rejectUnauthorized: false` took it): Node's code
    /// and words for `authorizationError`; None for a chain that verified.
    pub fn chain_failure(&self) -> Option<TlsFailure> {
        self.chain_failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// True once, when the handshake has completed: the driver tells JS then.
    pub fn newly_established(&mut self) -> bool {
        if self.told_established || self.session.is_handshaking() {
            return false;
        }
        self.told_established = true;
        true
    }

    /// The server's certificate (DER), once the handshake has brought it.
    pub fn peer_certificate(&self) -> Option<&[u8]> {
        self.session.peer_certificates().and_then(|chain| chain.first()).map(|cert| cert.as_ref())
    }

    /// Plaintext into `buf`: what is decrypted already, else ciphertext from the socket until
    /// some plaintext comes (WouldBlock when the socket has no more). Ok(0) is the end of the
    /// stream: the server's close_notify, or the socket's end.
    pub fn read(&mut self, tcp: &mut TcpSocket, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        loop {
            match self.take_plaintext(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The socket ended without close_notify: an end all the same, as Node has it.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                taken => return taken,
            }
            self.session.read_tls(&mut Socket(tcp))?;
            if let Err(error) = self.session.process_new_packets() {
                // rustls has queued an alert telling the server why.
                let _ = self.flush(tcp);
                return Err(tls_error(error));
            }
            // What the handshake answers (or a key update, an alert) leaves now. A socket that
            // is full keeps it for the driver's next write; one that fails is the write path's
            // to report: this read still hands over what it decrypted (a server's last words
            // come just before it resets the socket).
            let _ = self.flush(tcp);
            // The handshake has just completed: the driver tells JS before any plaintext.
            if !self.told_established && !self.session.is_handshaking() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
    }

    /// Copies out decrypted plaintext until `buf` is full or none is left: whatever fits is
    /// taken now, since the poll will not report what rustls holds.
    fn take_plaintext(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        let mut reader = self.session.reader();
        let mut filled = 0;
        while filled < buf.len() {
            let chunk = match reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if filled == 0 => return Err(e),
                Err(_) => break,
            };
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len().min(buf.len() - filled);
            buf[filled..filled + n].write_copy_of_slice(&chunk[..n]);
            reader.consume(n);
            filled += n;
        }
        Ok(filled)
    }

    /// Encrypts `bytes` (what rustls takes of them) and writes what it can: WouldBlock while
    /// ciphertext from before still waits, so that the core keeps the rest of its output.
    pub fn write(&mut self, tcp: &mut TcpSocket, bytes: &[u8]) -> io::Result<usize> {
        self.flush(tcp)?;
        let taken = self.session.writer().write(bytes)?;
        if taken == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        match self.flush(tcp) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(taken),
        }
    }

    /// Writes the ciphertext waiting; WouldBlock if the socket takes no more now.
    pub fn flush(&mut self, tcp: &mut TcpSocket) -> io::Result<()> {
        while self.session.wants_write() {
            self.session.write_tls(&mut Socket(tcp))?;
        }
        Ok(())
    }

    /// Ciphertext waits for the socket.
    pub fn wants_write(&self) -> bool {
        self.session.wants_write()
    }

    /// Tells the server the session ends (close_notify), to be flushed with the rest.
    pub fn close(&mut self) {
        self.session.send_close_notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_errors_take_nodes_codes_and_words() {
        let cases = [
            (CertificateError::UnknownIssuer, "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "unable to verify the first certificate"),
            (CertificateError::Expired, "CERT_HAS_EXPIRED", "certificate has expired"),
            (CertificateError::NotValidYet, "CERT_NOT_YET_VALID", "certificate is not yet valid"),
        ];
        for (cert, code, message) in cases {
            let e = tls_error(Error::InvalidCertificate(cert));
            assert_eq!(tls_failure(&e), Some(&TlsFailure { code, message: message.into() }));
        }
        let other = tls_error(Error::DecryptError);
        assert_eq!(tls_failure(&other).map(|f| f.code), Some("EPROTO"));
        assert_eq!(tls_failure(&io::Error::other("plain")), None);
    }

    /// A CA (self-signed) and a certificate it issued, made with openssl for these tests.
    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBejCCAR+gAwIBAgIUH9WfMJB0jVIODFZEk7iun5+n9RwwCgYIKoZIzj0EAwIw\nEjEQMA4GA1UEAwwHdGVzdCBjYTAeFw0yNjEyMDcwMjI4MjdaFw0zNjEyMDQwMjI4\nMjdaMBIxEDAOBgNVBAMMB3Rlc3QgY2EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC\nAAShG1Lp8pnv0H6iavIIHhstzbRcflA8KzP+z7YU82O+Yf+2FHT7CvR1nWTeSse6\nhd/d9fqX0RFjRi5Q7mtQcK0do1MwUTAdBgNVHQ4EFgQUlPjayMqH3kG4oeZDmQu4\nZLFmCvswHwYDVR0jBBgwFoAUlPjayMqH3kG4oeZDmQu4ZLFmCvswDwYDVR0TAQH/\nBAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEA3lTQxpCkBQhy/msm5cdJagzQ3HQJ\nAjHnX7nWhhtZp4sCIQC5oBpD02fOXcCqC+rDys5Kx2zUD6rv0gsqQOkjI4zKZQ==\n-----END CERTIFICATE-----";
    const LEAF: &str = "-----BEGIN CERTIFICATE-----\nMIIBGzCBwgIUI1LyQwQtrz1eknz/nHkkdsm92MkwCgYIKoZIzj0EAwIwEjEQMA4G\nA1UEAwwHdGVzdCBjYTAeFw0yNjEyMDcwMjI4MjdaFw0zNjEyMDQwMjI4MjdaMA8x\nDTALBgNVBAMMBGxlYWYwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASgkKWX8s3N\nXyaFpRqMkytAq7XmH/hfqLlHEiu9cS5XXSX7Nn8oZEH+ETbhmlAvvHFdO695jSzo\nDiAnIz51o90QMAoGCCqGSM49BAMCA0gAMEUCIQCvkAM0jj3jPrH23rnamcwsFH7D\nL3zvti9yBrfQrpjC3wIgPp6Zn1lb8k+yYWvGN+HtrFFh48FgoM4a5uvThbUOHv4=\n-----END CERTIFICATE-----";

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    #[test]
    fn an_unknown_issuer_is_told_apart_as_openssl_tells_it() {
        let (ca, leaf) = (der(CA), der(LEAF));
        assert!(is_self_signed(&ca));
        assert!(!is_self_signed(&leaf));
        let code = |end_entity: &CertificateDer<'_>, chain: &[CertificateDer<'_>]| node_code(&unknown_issuer(end_entity, chain));
        assert_eq!(code(&leaf, &[]), "UNABLE_TO_VERIFY_LEAF_SIGNATURE");
        assert_eq!(code(&leaf, std::slice::from_ref(&ca)), "SELF_SIGNED_CERT_IN_CHAIN");
        assert_eq!(code(&ca, &[]), "DEPTH_ZERO_SELF_SIGNED_CERT");
        assert_eq!(node_message("SELF_SIGNED_CERT_IN_CHAIN", &Error::DecryptError), "self-signed certificate in certificate chain");
        // Whatever the bytes, the walk ends without a panic.
        for cut in 0..ca.len() {
            let _ = is_self_signed(&ca[..cut]);
        }
        assert!(!is_self_signed(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]));
    }

    #[test]
    fn settings_that_cannot_work_are_refused_with_why() {
        let settings = |server_name: &str, roots: Vec<Vec<u8>>| TlsSettings { server_name: server_name.into(), roots, reject_unauthorized: true, client_auth: None, tls12: true, tls13: true };
        // No root to verify with is no error of the settings: as under Node, every chain then
        // fails at the handshake (or with rejectUnauthorized false is taken, not authorized).
        assert!(TlsSession::new(&settings("localhost", vec![])).is_ok());
        // Not a name a certificate can have.
        assert!(TlsSession::new(&settings("no such name!", vec![])).err().unwrap().contains("servername"));
        // No version at all.
        let none = TlsSettings { tls12: false, tls13: false, ..settings("localhost", vec![]) };
        assert!(TlsSession::new(&none).is_err());
    }
}
