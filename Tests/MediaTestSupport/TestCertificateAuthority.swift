// A certificate authority made at test time with the `openssl` command, for servers the tests start
// with TLS (Janus's HTTPS and secure WebSockets): a CA, a server certificate it signs for the
// names and addresses asked for, one it signs for another name only, and a second CA that signs
// nothing the server presents.
import Foundation

/// The PEM files of one test CA and its certificates, in a temporary directory removed by
/// `remove()`.
package struct TestCertificateAuthority {
    package let dir = InteropTempDir()
    /// The CA that signed `serverCertificate` and `elsewhereCertificate`.
    package var caFile: String { dir.file("ca.pem") }
    /// Another CA, which signed nothing the server presents.
    package var otherCAFile: String { dir.file("other-ca.pem") }
    /// The server certificate (for the names given to `init`) and its key.
    package var serverCertificate: String { dir.file("server.pem") }
    package var serverKey: String { dir.file("server.key") }
    /// A certificate from the same CA for elsewhere.revue.test only, and its key.
    package var elsewhereCertificate: String { dir.file("elsewhere.pem") }
    package var elsewhereKey: String { dir.file("elsewhere.key") }

    /// Makes the CA and certificates; the server's names its subjectAltName (`DNS:localhost`,
    /// `IP:127.0.0.1`...). Throws with openssl's output when it fails.
    package init(serverNames: [String] = ["DNS:localhost", "IP:127.0.0.1"]) throws {
        let script = """
            set -e
            cd '\(dir.path)'
            key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
            ca() {
                key "$1.key"
                openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" \\
                    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
            }
            leaf() {
                key "$1.key"
                openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2"
                printf 'subjectAltName=%s\\nextendedKeyUsage=serverAuth\\nkeyUsage=critical,digitalSignature\\n' "$3" > "$1.ext"
                openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
            }
            ca ca "Revue Test CA"
            ca other-ca "Another Test CA"
            leaf server revue-test-server '\(serverNames.joined(separator: ","))'
            leaf elsewhere elsewhere.revue.test 'DNS:elsewhere.revue.test'
            chmod 644 *.key
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", script]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            dir.remove()
            throw ToolMissing(tool: "openssl (making the test certificates failed: \(String(decoding: data, as: UTF8.self)))")
        }
    }

    /// Removes the files.
    package func remove() { dir.remove() }
}
