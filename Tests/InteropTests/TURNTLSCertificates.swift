import Foundation
import MediaTestSupport
import Testing

@testable import MediaCore

// Certificates for the TURN-over-TLS tests, made with the `openssl` command at test time: a test CA,
// a server certificate it signs for 127.0.0.1, ::1 and turn.revue.test, one it signs for another
// name only, and a second CA that signs nothing the server presents.

/// The files of one set of test certificates (PEM), in a temporary directory removed by `remove()`.
struct TURNTLSCertificates {
    let dir = InteropTempDir()
    /// The CA that signed `serverCertificate` and `elsewhereCertificate`.
    var caFile: String { dir.file("ca.pem") }
    /// Another CA, which signed nothing the server presents.
    var otherCAFile: String { dir.file("other-ca.pem") }
    /// The server certificate (subjectAltName IP 127.0.0.1, IP ::1, DNS turn.revue.test) and key.
    var serverCertificate: String { dir.file("server.pem") }
    var serverKey: String { dir.file("server.key") }
    /// A certificate from the same CA for elsewhere.revue.test only, and its key.
    var elsewhereCertificate: String { dir.file("elsewhere.pem") }
    var elsewhereKey: String { dir.file("elsewhere.key") }

    init() throws {
        let d = dir.path
        let script = """
            set -e
            cd '\(d)'
            key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
            ca() {
                key "$1.key"
                openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" \\
                    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
            }
            leaf() {
                key "$1.key"
                openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2"
                printf 'subjectAltName=%s\\nextendedKeyUsage=serverAuth\\n' "$3" > "$1.ext"
                openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
            }
            ca ca "Revue Test CA"
            ca other-ca "Another Test CA"
            leaf server turn.revue.test 'IP:127.0.0.1,IP:::1,DNS:turn.revue.test'
            leaf elsewhere elsewhere.revue.test 'DNS:elsewhere.revue.test'
            """
        let run = runShell(script)
        guard run.status == 0 else {
            dir.remove()
            throw CoturnNotReady(detail: "openssl could not make the test certificates: \(run.output)")
        }
    }

    /// The SHA-256 digest of a PEM certificate's DER encoding.
    func sha256(of certificate: String) throws -> [UInt8] {
        let run = runShell("openssl x509 -in '\(certificate)' -noout -fingerprint -sha256")
        let hex = run.output.split(separator: "=").last.map { $0.filter(\.isHexDigit) } ?? ""
        guard run.status == 0, hex.count == 64 else { throw CoturnNotReady(detail: "openssl fingerprint: \(run.output)") }
        return stride(from: 0, to: 64, by: 2).map {
            UInt8(hex[hex.index(hex.startIndex, offsetBy: $0)..<hex.index(hex.startIndex, offsetBy: $0 + 2)], radix: 16)!
        }
    }

    func remove() { dir.remove() }
}
