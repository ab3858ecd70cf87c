// The call layer's wire messages: JSON objects in the SDK's reserved format (a "type" of msg, adr
// or track), sent on the friend's reliable, ordered, Noise-encrypted message stream, so the other
// side's SDK takes them and its App never sees them.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One call-layer message. `type` is "msg" (invitations, membership, chat, mute requests, modes),
/// "adr" (media endpoint and SRTP keys) or "track" (track announcements).
struct CallSignal: Codable, Sendable, Equatable {
    var type: String
    /// What the message does (see `Op`).
    var op: String
    /// The invitation it belongs to (random, 16 hex digits).
    var inv: String?
    /// Invitation message, chat text, or track name.
    var text: String?
    /// Friend IDs of the sender's other participants (accept, connect, join, joined).
    var members: [String]?
    /// Participant mode ("sendAndRecv", "signallingOnly", "recvOnly").
    var mode: String?
    /// Mute state (mute request, track mute).
    var muted: Bool?
    /// Track ID and kind ("audio"/"video").
    var sid: String?
    var kind: String?
    /// Whether the sender wants a track of the receiver (subscription).
    var subscribed: Bool?
    /// Media: the sender's SRTP suite and key (RFC 4568 inline form) for the direction sender ->
    /// receiver of this call leg. (The path is the friends' link, set up by the session.)
    var suite: String?
    var key: String?
    /// Speaking: whether the sender speaks, and its level (0...1).
    var speaking: Bool?
    var level: Double?
    /// Introductions handed to a newcomer (`intros`): the introduction token for each member.
    var intros: [String: String]?
    /// Calls through an SFU (`sfu`): the sender's server and room, its feed id there (decimal),
    /// and its SFrame key IDs (video, audio; the base key in `key`, base64).
    var sfu: String?
    var feed: String?
    var kids: [UInt64]?
    /// The sender's process epoch (`hello`): random per run, so a restarted friend is recognised.
    var epoch: String?

    enum Op {
        static let invite = "invite", cancel = "cancel", reject = "reject", end = "end", accept = "accept"
        static let connect = "connect", join = "join", joined = "joined", hangup = "hangup"
        static let chat = "chat", muteRequest = "mute-request", mode = "mode"
        static let publish = "publish", unpublish = "unpublish", mute = "mute", subscribe = "subscribe"
        static let speaking = "speaking", media = "media"
        static let introduce = "introduce", intros = "intros", hello = "hello", sfu = "sfu"
    }

    init(type: String = "msg", op: String, inv: String? = nil) {
        self.type = type
        self.op = op
        self.inv = inv
    }

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// Parses a message as a call signal; nil when it is not one (the caller decides whether it
    /// was a malformed reserved message, dropped and counted, or the App's).
    static func parse(_ body: [UInt8]) -> CallSignal? {
        // Only a JSON object can be one: plain-text App messages cost no decoder.
        guard body.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) == UInt8(ascii: "{") else {
            return nil
        }
        return try? JSONDecoder().decode(CallSignal.self, from: Data(body))
    }

    /// Parses a message's text as a call signal (tests and fuzzing).
    static func parse(_ text: String) -> CallSignal? { parse(Array(text.utf8)) }
}
