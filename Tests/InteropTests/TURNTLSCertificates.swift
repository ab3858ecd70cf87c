import Foundation
import MediaCore
import MediaTestSupport
import Testing

// Certificates for the TURN-over-TLS tests: the shared test CA (`TestCertificateAuthority`) with a
// server certificate for 127.0.0.1, ::1 and turn.revue.test, one for another name only, and a
// second CA that signs nothing the server presents.

/// One set of test certificates for coturn (PEM files), removed by `remove()`.
struct TURNTLSCertificates {
    let authority: TestCertificateAuthority
    /// The CA that signed `serverCertificate` and `elsewhereCertificate`.
    var caFile: String { authority.caFile }
    /// Another CA, which signed nothing the server presents.
    var otherCAFile: String { authority.otherCAFile }
    /// The server certificate (subjectAltName IP 127.0.0.1, IP ::1, DNS turn.revue.test) and key.
    var serverCertificate: String { authority.serverCertificate }
    var serverKey: String { authority.serverKey }
    /// A certificate from the same CA for elsewhere.revue.test only, and its key.
    var elsewhereCertificate: String { authority.elsewhereCertificate }
    var elsewhereKey: String { authority.elsewhereKey }

    init() throws {
        do {
            authority = try TestCertificateAuthority(serverNames: ["IP:127.0.0.1", "IP:::1", "DNS:turn.revue.test"])
        } catch {
            throw CoturnNotReady(detail: "\(error)")
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

    func remove() { authority.remove() }
}
