// Janus's VideoRoom plugin (`janus.plugin.videoroom`, the selective forwarding unit): rooms,
// publishers that send one peer connection up, and subscribers that receive a publisher's feed on
// a peer connection of their own that Janus offers. docs/sfu.md.
import MediaBase

/// A publisher in a room as Janus lists it (`publishers` in `joined` and `event`).
/// Thread rule: a value type. Cost: none.
package struct JanusPublisher: Sendable, Hashable {
    /// The publisher's feed id (its participant id in the room).
    package var id: UInt64
    /// Its display name, if it gave one.
    package var display: String?
    /// The codecs of its streams (`opus`, `vp8`, ...).
    package var codecs: [String]

    /// A publisher. Cost: none.
    package init(id: UInt64, display: String?, codecs: [String]) {
        self.id = id
        self.display = display
        self.codecs = codecs
    }

    init?(_ json: JSONValue) {
        guard let id = json["id"]?.id else { return nil }
        self.init(
            id: id, display: json["display"]?.string,
            codecs: (json["streams"]?.array ?? []).compactMap { $0["codec"]?.string })
    }
}

/// A participant in a room as `listparticipants` reports it. Thread rule: a value type. Cost: none.
package struct JanusParticipant: Sendable, Hashable {
    /// Its participant id (a publisher's feed id).
    package var id: UInt64
    /// Its display name, if it gave one.
    package var display: String?
    /// Whether it is publishing media now.
    package var publisher: Bool
}

/// What a publisher learns when it joins a room. Thread rule: a value type. Cost: none.
package struct JanusJoined: Sendable, Hashable {
    /// The room.
    package var room: UInt64
    /// Our participant id (the feed id others subscribe to once we publish).
    package var id: UInt64
    /// Our private id: subscriptions made with it are tied to this participant.
    package var privateID: UInt64
    /// The publishers already in the room.
    package var publishers: [JanusPublisher]
}

/// One stream of a subscription as Janus describes it (`streams` in `attached` and `updated`):
/// which section (mid) carries which publisher's stream. Thread rule: a value type. Cost: none.
package struct JanusSubscriberStream: Sendable, Hashable {
    /// The section's mid in Janus's offer.
    package var mid: String
    /// `audio`, `video` or `data`.
    package var type: String
    /// The publisher whose stream it carries (nil for a data channel or an emptied section).
    package var feed: UInt64?
    /// Whether the section carries a stream now (false once its publisher left or it was
    /// unsubscribed; Janus may reuse the section later).
    package var active: Bool

    init?(_ json: JSONValue) {
        guard let mid = json["mid"]?.string, let type = json["type"]?.string else { return nil }
        self.mid = mid
        self.type = type
        feed = json["feed_id"]?.id
        active = json["active"]?.bool ?? true
    }
}

/// Janus's description of a subscription after a change: the streams it now carries and, when
/// the change needs a renegotiation, the offer (SDP text) to answer with `start(answer:)`.
/// Thread rule: a value type. Cost: none.
package struct JanusSubscriberUpdate: Sendable, Hashable {
    /// Janus's offer, when it sent one.
    package var sdp: String?
    /// Every section of the subscription.
    package var streams: [JanusSubscriberStream]

    /// Reads a reply or an `updated` event (the plugin data's `streams`, the `jsep` offer).
    package init(_ event: JSONValue) {
        sdp = event["jsep"]?["type"]?.string == "offer" ? event["jsep"]?["sdp"]?.string : nil
        streams = (event["plugindata"]?["data"]?["streams"]?.array ?? []).compactMap(JanusSubscriberStream.init)
    }
}

/// An asynchronous event of a VideoRoom handle (one nobody's request waited for).
/// Thread rule: a value type. Cost: none.
package enum JanusVideoRoomEvent: Sendable, Hashable {
    /// Publishers started publishing in the room (`publishers` in an event).
    case publishers([JanusPublisher])
    /// A publisher stopped publishing (`unpublished` with its feed id).
    case unpublished(UInt64)
    /// A participant left the room (`leaving` with its id).
    case leaving(UInt64)
    /// A publisher started or stopped talking (`talking`/`stopped-talking`, when the room has
    /// `audiolevel_event`).
    case talking(UInt64, Bool)
    /// The subscription's streams changed (`updated`; with a new offer when Janus renegotiates).
    case updated(JSONValue)
    /// The handle's peer connection is up on Janus's side (`webrtcup`).
    case webrtcUp
    /// Janus started or stopped receiving a kind of media (`media`: "audio"/"video", receiving).
    case media(String, Bool)
    /// The handle's peer connection ended on Janus's side (`hangup`, with the reason).
    case hangup(String)
    /// The handle was detached.
    case detached
    /// Any other event, as Janus sent it.
    case other(JSONValue)

    package static func parse(_ event: JSONValue) -> [JanusVideoRoomEvent] {
        switch event["janus"]?.string {
        case "webrtcup": return [.webrtcUp]
        case "media": return [.media(event["type"]?.string ?? "", event["receiving"]?.bool ?? false)]
        case "hangup": return [.hangup(event["reason"]?.string ?? "")]
        case "detached": return [.detached]
        case "event": break
        default: return [.other(event)]
        }
        guard let data = event["plugindata"]?["data"] else { return [.other(event)] }
        var out: [JanusVideoRoomEvent] = []
        if let list = data["publishers"]?.array {
            let publishers = list.compactMap(JanusPublisher.init)
            if !publishers.isEmpty { out.append(.publishers(publishers)) }
        }
        if let id = data["unpublished"]?.id { out.append(.unpublished(id)) }
        if let id = data["leaving"]?.id { out.append(.leaving(id)) }
        switch data["videoroom"]?.string {
        case "talking": if let id = data["id"]?.id { out.append(.talking(id, true)) }
        case "stopped-talking": if let id = data["id"]?.id { out.append(.talking(id, false)) }
        case "updated": out.append(.updated(event))
        default: break
        }
        return out.isEmpty ? [.other(event)] : out
    }
}

/// Settings of a room made with `JanusVideoRoom.createRoom`. Thread rule: a value type. Cost: none.
package struct JanusRoomOptions: Sendable {
    /// The room id (nil: Janus picks one).
    package var room: UInt64?
    /// A description shown in lists.
    package var description: String?
    /// How many publishers may publish at once.
    package var publishers = 6
    /// The video codec(s) publishers may use, Janus's comma-separated names.
    package var videoCodec = "vp8"
    /// The audio codec(s) publishers may use.
    package var audioCodec = "opus"
    /// The most a publisher may send (bits per second; Janus sends it in REMB; 0: no cap).
    package var bitrate = 0
    /// Whether Janus sends `talking`/`stopped-talking` events (needs the publishers' audio-level
    /// header extension).
    package var audioLevelEvents = false
    /// The room's `secret`: needed to destroy or edit it (nil: none).
    package var secret: String?
    /// The room's `pin`: needed to join it (nil: anyone may join).
    package var pin: String?

    /// The defaults above. Cost: none.
    package init() {}
}

/// One handle of the VideoRoom plugin: a publisher (join, publish, unpublish, leave), a
/// subscriber to one or more feeds (join as subscriber, answer Janus's offer with `start`), or
/// an administrative handle (create and destroy rooms, list participants). Requests wait for
/// Janus's answer; events nobody waited for are in `events`.
///
/// Thread rule: every method from any task (the session actor orders the requests). Cost: one
/// HTTP request per method; media goes over the `PeerConnection` the caller makes, not here.
package final class JanusVideoRoom: Sendable {
    /// The Janus plugin package name.
    package static let plugin = "janus.plugin.videoroom"

    /// The session the handle belongs to.
    package let session: JanusSession
    /// The handle's id on the server.
    package let handle: UInt64
    /// Events addressed to this handle that no request waited for (publishers arriving,
    /// unpublished, leaving, webrtcup, hangup...). Ends when the handle is detached or the
    /// session destroyed. One consumer; cancelling its iteration ends the stream for good.
    package let events: AsyncStream<JanusVideoRoomEvent>

    /// Attaches a VideoRoom handle to `session`. Thread rule: any task. Cost: one request.
    package init(session: JanusSession) async throws(JanusError) {
        let (handle, raw) = try await session.attach(plugin: Self.plugin)
        self.session = session
        self.handle = handle
        events = AsyncStream(bufferingPolicy: .bufferingNewest(256)) { continuation in
            let task = Task {
                for await event in raw {
                    for e in JanusVideoRoomEvent.parse(event) { continuation.yield(e) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Creates a room (`create`) and returns its id. Throws `.janus` (e.g. 427: the room exists).
    /// Thread rule: any task. Cost: one request.
    package func createRoom(_ options: JanusRoomOptions = JanusRoomOptions()) async throws(JanusError) -> UInt64 {
        var body: JSONValue = [
            "request": "create", "publishers": .int(Int64(options.publishers)),
            "videocodec": .string(options.videoCodec), "audiocodec": .string(options.audioCodec),
            "bitrate": .int(Int64(options.bitrate)), "audiolevel_event": .bool(options.audioLevelEvents),
        ]
        if let room = options.room { body = body.setting("room", .int(Int64(room))) }
        if let d = options.description { body = body.setting("description", .string(d)) }
        if let secret = options.secret { body = body.setting("secret", .string(secret)) }
        if let pin = options.pin { body = body.setting("pin", .string(pin)) }
        let reply = try await session.message(handle: handle, body: body)
        guard let room = Self.data(reply)["room"]?.id else { throw .malformed("no room in \(reply)") }
        return room
    }

    /// Destroys a room (`destroy`, with the room's `secret` when it has one); its participants
    /// get `leaving`/`destroyed` events. A wrong secret throws `.unauthorized`.
    /// Thread rule: any task. Cost: one request.
    package func destroyRoom(_ room: UInt64, secret: String? = nil) async throws(JanusError) {
        var body: JSONValue = ["request": "destroy", "room": .int(Int64(room))]
        if let secret { body = body.setting("secret", .string(secret)) }
        _ = try await session.message(handle: handle, body: body)
    }

    /// The participants of a room (`listparticipants`): who is there and who publishes.
    /// Thread rule: any task. Cost: one request.
    package func listParticipants(room: UInt64) async throws(JanusError) -> [JanusParticipant] {
        let reply = try await session.message(handle: handle, body: ["request": "listparticipants", "room": .int(Int64(room))])
        return (Self.data(reply)["participants"]?.array ?? []).compactMap { p in
            p["id"]?.id.map { JanusParticipant(id: $0, display: p["display"]?.string, publisher: p["publisher"]?.bool ?? false) }
        }
    }

    /// Joins `room` as a publisher (`join`, `ptype: publisher`): we are in the room and see its
    /// publishers, but send nothing until `publish`. A room with a `pin` needs it (a wrong one
    /// throws `.unauthorized`). Thread rule: any task. Cost: one request.
    package func joinAsPublisher(room: UInt64, display: String? = nil, pin: String? = nil) async throws(JanusError) -> JanusJoined
    {
        var body: JSONValue = ["request": "join", "ptype": "publisher", "room": .int(Int64(room))]
        if let display { body = body.setting("display", .string(display)) }
        if let pin { body = body.setting("pin", .string(pin)) }
        let data = Self.data(try await session.message(handle: handle, body: body))
        guard data["videoroom"]?.string == "joined", let id = data["id"]?.id else {
            throw .malformed("join answered \(data)")
        }
        return JanusJoined(
            room: room, id: id, privateID: data["private_id"]?.id ?? 0,
            publishers: (data["publishers"]?.array ?? []).compactMap(JanusPublisher.init))
    }

    /// Publishes (`publish` with our JSEP offer, SDP text) and returns Janus's answer (SDP text)
    /// for our `PeerConnection`. Thread rule: any task. Cost: one request; Janus answers once it
    /// has gathered its candidates (usually a few ms).
    package func publish(offer sdp: String, display: String? = nil) async throws(JanusError) -> String {
        var body: JSONValue = ["request": "publish"]
        if let display { body = body.setting("display", .string(display)) }
        let reply = try await session.message(handle: handle, body: body, jsep: ["type": "offer", "sdp": .string(sdp)])
        guard reply["jsep"]?["type"]?.string == "answer", let answer = reply["jsep"]?["sdp"]?.string else {
            throw .malformed("publish answered without a JSEP answer: \(Self.data(reply))")
        }
        return answer
    }

    /// Changes a publisher's or subscriber's settings (`configure`, e.g. `["audio": false]` or a
    /// `bitrate`), with a JSEP offer when one is given; returns Janus's JSEP answer SDP if any.
    /// Thread rule: any task. Cost: one request.
    package func configure(_ settings: JSONValue = [:], offer sdp: String? = nil) async throws(JanusError) -> String? {
        let body = settings.setting("request", "configure")
        let reply = try await session.message(
            handle: handle, body: body, jsep: sdp.map { ["type": "offer", "sdp": .string($0)] })
        return reply["jsep"]?["sdp"]?.string
    }

    /// Stops publishing (`unpublish`); the room's other participants get `unpublished` and
    /// Janus hangs up this handle's peer connection. Thread rule: any task. Cost: one request.
    package func unpublish() async throws(JanusError) {
        _ = try await session.message(handle: handle, body: ["request": "unpublish"])
    }

    /// Leaves the room (`leave`): a publisher stops publishing and others get `leaving`; a
    /// subscriber's subscription ends. Thread rule: any task. Cost: one request.
    package func leave() async throws(JanusError) {
        _ = try await session.message(handle: handle, body: ["request": "leave"])
    }

    /// Subscribes to `feeds` of `room` (`join`, `ptype: subscriber`, one stream list entry per
    /// feed) and returns Janus's offer (SDP text, `sendonly` media with Janus's candidates) and
    /// its streams; answer it with `start`. `privateID` ties the subscription to our publisher,
    /// if we have one; `pin` is the room's, when it has one. Thread rule: any task. Cost: one request.
    package func joinAsSubscriber(room: UInt64, feeds: [UInt64], privateID: UInt64? = nil, pin: String? = nil)
        async throws(JanusError) -> JanusSubscriberUpdate
    {
        var body: JSONValue = [
            "request": "join", "ptype": "subscriber", "room": .int(Int64(room)),
            "streams": .array(feeds.map { ["feed": .int(Int64($0))] }),
        ]
        if let privateID { body = body.setting("private_id", .int(Int64(privateID))) }
        if let pin { body = body.setting("pin", .string(pin)) }
        return try await offering(body, "join")
    }

    /// Adds `feeds` to this subscriber handle's subscription (`subscribe`, Janus's multistream
    /// API): the same peer connection receives them, in new (or reused) sections of the
    /// renegotiation offer this returns; answer it with `start(answer:)` after applying it to
    /// the connection. Thread rule: any task. Cost: one request.
    package func subscribe(feeds: [UInt64]) async throws(JanusError) -> JanusSubscriberUpdate {
        try await offering(["request": "subscribe", "streams": .array(feeds.map { ["feed": .int(Int64($0))] })], "subscribe")
    }

    /// Removes `feeds` from this subscriber handle's subscription (`unsubscribe`): their
    /// sections go inactive in the renegotiation offer this returns (when Janus sends one).
    /// Thread rule: any task.
    /// Cost: one request.
    package func unsubscribe(feeds: [UInt64]) async throws(JanusError) -> JanusSubscriberUpdate {
        try await offering(
            ["request": "unsubscribe", "streams": .array(feeds.map { ["feed": .int(Int64($0))] })], nil)
    }

    /// Sends a request Janus answers with an offer, and reads it; a request `name`d must have one.
    private func offering(_ body: JSONValue, _ name: String?) async throws(JanusError) -> JanusSubscriberUpdate {
        let reply = try await session.message(handle: handle, body: body)
        let update = JanusSubscriberUpdate(reply)
        guard update.sdp != nil || name == nil else {
            throw .malformed("\(name ?? "") answered without a JSEP offer: \(Self.data(reply))")
        }
        return update
    }

    /// Answers Janus's subscriber offer, the first one or a renegotiation (`start` with our JSEP
    /// answer, SDP text); media flows once ICE and DTLS are done. Thread rule: any task. Cost: one request.
    package func start(answer sdp: String) async throws(JanusError) {
        let reply = try await session.message(
            handle: handle, body: ["request": "start"], jsep: ["type": "answer", "sdp": .string(sdp)])
        let data = Self.data(reply)
        guard data["started"]?.string == "ok" else { throw .malformed("start answered \(data)") }
    }

    /// Detaches the handle (its peer connection on Janus's side ends; `events` ends).
    /// Thread rule: any task. Cost: one request.
    package func detach() async throws(JanusError) {
        try await session.detach(handle: handle)
    }

    private static func data(_ reply: JSONValue) -> JSONValue { reply["plugindata"]?["data"] ?? .null }
}
