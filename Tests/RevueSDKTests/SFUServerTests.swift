import RevueSDK
import Testing

/// The SFU setting as an app writes it with `import RevueSDK` alone: the four URL schemes, a host
/// name, the credentials.
struct SFUServerTests {
    @Test func urlsAndCredentials() {
        for url in [
            "http://127.0.0.1:8088/janus", "https://janus.example.org/janus", "ws://[::1]:8188/", "wss://janus.example.org:8989",
        ] {
            #expect(SFUServer(url: url, room: 7).isUsable, "\(url)")
        }
        for url in ["ftp://janus.example.org/", "https://user@janus.example.org/", "wss://janus example/", "janus.example.org"] {
            #expect(!SFUServer(url: url, room: 7).isUsable, "\(url)")
        }
        #expect(!SFUServer(url: "wss://janus.example.org/", room: 0).isUsable)
        #expect(!SFUServer(url: "wss://janus.example.org/", room: 1 << 53).isUsable)
        let s = SFUServer(
            url: "wss://janus.example.org/", room: 7, apiSecret: "a", token: "t", roomSecret: "r", pin: "1234",
            certificateAuthorityFile: "/etc/ssl/private-ca.pem")
        #expect(s.isUsable && s.endToEndEncryption && s.token == "t" && s.pin == "1234" && s.roomSecret == "r")
        #expect(s.apiSecret == "a" && s.certificateAuthorityFile == "/etc/ssl/private-ca.pem")
    }
}
