import MediaCore
// The Janus client's pure parts: HTTP/1.1 responses (Content-Length, chunked, to the end of the
// connection, incomplete, malformed), JSON with Janus's 53-bit identifiers, and VideoRoom events.
import Testing

struct JanusClientParsingTests {
    static func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func responsesByLengthChunkedAndEndOfConnection() throws {
        let byLength = Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhello")
        #expect(try JanusHTTPClient.parse(byLength, complete: false)?.body == Self.bytes("hello"))
        // One byte short: not yet complete; at the end of the connection it is an error.
        let short = Array(byLength.dropLast())
        #expect(try JanusHTTPClient.parse(short, complete: false) == nil)
        #expect(throws: JanusError.self) { try JanusHTTPClient.parse(short, complete: true) }

        let chunked = Self.bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4;x=1\r\ndefg\r\n0\r\n\r\n")
        let c = try #require(try JanusHTTPClient.parse(chunked, complete: false))
        #expect(c.status == 200 && c.body == Self.bytes("abcdefg"))
        #expect(try JanusHTTPClient.parse(Array(chunked.prefix(60)), complete: false) == nil)

        let toEnd = Self.bytes("HTTP/1.0 404 Not Found\r\n\r\nnothing here")
        #expect(try JanusHTTPClient.parse(toEnd, complete: false) == nil)
        let r = try #require(try JanusHTTPClient.parse(toEnd, complete: true))
        #expect(r.status == 404 && r.body == Self.bytes("nothing here"))
    }

    @Test func malformedResponsesThrow() {
        for text in ["SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1 abc OK\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n"] {
            #expect(throws: JanusError.self, "\(text)") { try JanusHTTPClient.parse(Self.bytes(text), complete: true) }
        }
        #expect(throws: JanusError.self) {
            try JanusHTTPClient.parse(Self.bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), complete: true)
        }
    }

    @Test func jsonKeepsJanusIdentifiersExact() throws {
        let json = try JSONValue.parse(
            Self.bytes(#"{"janus":"success","data":{"id":8841414694755395},"n":1.5,"ok":true,"list":[1,"a",null]}"#))
        #expect(json["janus"]?.string == "success")
        #expect(json["data"]?["id"]?.id == 8_841_414_694_755_395)
        #expect(json["n"] == .double(1.5) && json["n"]?.int == nil)
        #expect(json["ok"]?.bool == true)
        #expect(json["list"]?.array?.count == 3)
        // Written and read back unchanged.
        #expect(try JSONValue.parse(json.bytes) == json)
        #expect(throws: JanusError.self) { try JSONValue.parse(Self.bytes("{not json")) }
        let built: JSONValue = ["request": "join", "room": 1234]
        #expect(built.setting("ptype", "publisher")["ptype"]?.string == "publisher")
    }

    @Test func videoRoomEventsAreTyped() throws {
        func event(_ data: String, janus: String = "event") throws -> [JanusVideoRoomEvent] {
            JanusVideoRoomEvent.parse(
                try JSONValue.parse(
                    Self.bytes(
                        #"{"janus":"\#(janus)","sender":7,"plugindata":{"plugin":"janus.plugin.videoroom","data":\#(data)}}"#)))
        }
        #expect(try event(#"{"videoroom":"event","room":1,"unpublished":42}"#) == [.unpublished(42)])
        #expect(try event(#"{"videoroom":"event","room":1,"leaving":43}"#) == [.leaving(43)])
        #expect(try event(#"{"videoroom":"talking","room":1,"id":44}"#) == [.talking(44, true)])
        #expect(try event(#"{"videoroom":"stopped-talking","room":1,"id":44}"#) == [.talking(44, false)])
        let publishers = try event(
            #"{"videoroom":"event","room":1,"publishers":[{"id":5,"display":"x","streams":[{"codec":"vp8"},{"codec":"opus"}]}]}"#)
        #expect(publishers == [.publishers([JanusPublisher(id: 5, display: "x", codecs: ["vp8", "opus"])])])
        #expect(try event("{}", janus: "webrtcup") == [.webrtcUp])
        #expect(
            JanusVideoRoomEvent.parse(try JSONValue.parse(Self.bytes(#"{"janus":"hangup","sender":7,"reason":"DTLS alert"}"#)))
                == [.hangup("DTLS alert")])
    }
}
