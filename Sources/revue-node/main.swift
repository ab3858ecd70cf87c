import Dispatch
import MediaCore
import RevueCommandLine
// revue-node: a headless Revue peer driven by JSON lines on stdin, reporting every RevueDelegate
// event as a JSON line on stdout; or, with a bare --rendezvous, a rendezvous node.
// The protocol is documented in docs/revue-node.md.
import RevueNodeProtocol
import RevueSession
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

signal(SIGPIPE, SIG_IGN)

/// Writes one event as a line on stdout (`NodeEvent.line`).
func emit(_ event: NodeEvent) {
    guard let line = event.line else {
        StandardStream.error("revue-node: an event with a value JSON cannot hold: \(event)\n")
        return
    }
    StandardStream.output(line + "\n")
}

/// Prints `message` on stderr and exits: status 2 for bad usage (the default), 1 for a failure.
func fail(_ message: String, status: Int32 = 2) -> Never {
    StandardStream.error("revue-node: \(message)\n")
    exit(status)
}

let spec = CommandSpec(
    invocation: "revue-node",
    summary: """
        A headless Revue peer: reads commands as JSON lines on stdin and writes every event as a JSON
        line on stdout (docs/revue-node.md). With a bare --rendezvous it serves as a rendezvous node.
        """,
    options: [
        OptionSpec("--data", value: "DIR", help: "data directory (identity, friends); required for a peer"),
        OptionSpec("--host", value: "ADDR", help: "address to bind (default 0.0.0.0; :: for IPv6 and IPv4 on one socket)"),
        OptionSpec("--port", value: "N", help: "UDP port to bind, 0-65535 (default 0: any free port)"),
        OptionSpec("--name", value: "NAME", help: "your display name"),
        OptionSpec(
            "--rendezvous", value: "HOST:PORT", valueIsOptional: true,
            help: "a rendezvous node to register with (repeatable); alone: be one"),
        OptionSpec("--stun", value: "HOST:PORT", help: "a STUN server for call media (repeatable)"),
        OptionSpec(
            "--turn", value: "USER:PASS@HOST:PORT[?transport=tcp]",
            help: "a TURN server for call media, over UDP or TCP, or TLS as turns:USER:PASS@HOST[:PORT][?ca=FILE] (repeatable)"),
        OptionSpec(
            "--turn-url", value: "turn:HOST:PORT[?transport=tcp]|turns:HOST:PORT",
            help: "with --rendezvous: a coturn server whose credentials the node hands its peers (repeatable, up to 4)"),
        OptionSpec(
            "--turn-secret", value: "FILE", help: "with --turn-url: the file holding coturn's static-auth-secret"),
        OptionSpec(
            "--turn-lifetime", value: "S", help: "with --turn-url: seconds each set of TURN credentials lasts (default 3600)"),
        OptionSpec("--lan", help: "discover peers on the local network"),
        OptionSpec("--invitation-timeout", value: "S", help: "seconds an invitation waits for an answer"),
        OptionSpec("--mode", value: "MODE", help: "sendAndRecv, signallingOnly or recvOnly (default sendAndRecv)"),
        OptionSpec("--no-mic", help: "join calls without an audio track"),
        OptionSpec("--no-camera", help: "join calls without a video track"),
        OptionSpec(
            "--video-size", value: "WxH", help: "camera test pattern size, even numbers from 16 to 4096 (default 320x240)"),
        OptionSpec(
            "--call-lost-timeout", value: "S",
            help: "seconds an offline participant may stay in a call before it leaves (default 0)"),
        OptionSpec(
            "--sfu", value: "URL",
            help:
                "send call media through a Janus VideoRoom: http(s)://HOST:PORT/janus or ws(s)://HOST:PORT/ (every participant names the same one)"
        ),
        OptionSpec("--sfu-room", value: "N", help: "the VideoRoom room number with --sfu (default 1)"),
        OptionSpec("--sfu-clear", help: "with --sfu, no end-to-end frame encryption (a browser can then subscribe)"),
        OptionSpec("--sfu-api-secret", value: "FILE", help: "with --sfu: the file holding Janus's api_secret"),
        OptionSpec("--sfu-token", value: "FILE", help: "with --sfu: the file holding a Janus token (token_auth)"),
        OptionSpec("--sfu-room-secret", value: "FILE", help: "with --sfu: the file holding the room's secret (set on creation)"),
        OptionSpec("--sfu-pin", value: "FILE", help: "with --sfu: the file holding the room's pin"),
        OptionSpec("--sfu-ca", value: "FILE", help: "with an https or wss --sfu: the PEM file of the CAs to trust"),
    ])

struct Options {
    var data: String?
    var host = "0.0.0.0"
    var port: UInt16 = 0
    var name: String?
    var rendezvousNodes: [String] = []
    var serveRendezvous = false
    var iceServers: [RevueICEServer] = []
    var turnOffer: TURNOffer?
    var lan = false
    var invitationTimeout: Double?
    var mode: ParticipantMode = .sendAndRecv
    var mic = true
    var camera = true
    var videoSize: (width: Int, height: Int)?
    var callLostTimeout: Double?
    var sfu: SFUServer?
}

func parseOptions() throws -> Options {
    let a = try spec.parse(Array(CommandLine.arguments.dropFirst()))
    if let extra = a.positional.first { throw UsageError(description: "unexpected argument \(extra)") }
    var o = Options()
    o.data = a.string("--data")
    o.host = a.string("--host") ?? o.host
    if let p = try a.int("--port", range: 0...65_535) { o.port = UInt16(p) }
    o.name = a.string("--name")
    o.rendezvousNodes = a.strings("--rendezvous")
    o.serveRendezvous = a.flag("--rendezvous")
    o.iceServers = try iceServers(stun: a.strings("--stun"), turn: a.strings("--turn"))
    o.turnOffer = try turnOffer(
        urls: a.strings("--turn-url"), secretFile: a.string("--turn-secret"),
        lifetime: try a.int("--turn-lifetime", range: 2...604_800), rendezvous: o.serveRendezvous && o.data == nil)
    o.lan = a.flag("--lan")
    if let t = try a.double("--invitation-timeout") {
        guard t > 0 else { throw UsageError(description: "--invitation-timeout needs seconds above 0") }
        o.invitationTimeout = t
    }
    if let m = a.string("--mode") {
        guard let mode = ParticipantMode(rawValue: m) else {
            throw UsageError(description: "--mode is sendAndRecv, signallingOnly or recvOnly")
        }
        o.mode = mode
    }
    o.mic = !a.flag("--no-mic")
    o.camera = !a.flag("--no-camera")
    if let size = a.string("--video-size") {
        let parts = size.split(separator: "x").compactMap { Int($0) }
        guard parts.count == 2, (16...4096).contains(parts[0]), (16...4096).contains(parts[1]), parts[0] % 2 == 0,
            parts[1] % 2 == 0
        else {
            throw UsageError(description: "--video-size is WxH, even numbers from 16 to 4096")
        }
        o.videoSize = (parts[0], parts[1])
    }
    if let t = try a.double("--call-lost-timeout") {
        guard t >= 0 else { throw UsageError(description: "--call-lost-timeout needs seconds, 0 or more") }
        o.callLostTimeout = t
    }
    if let url = a.string("--sfu") {
        let room = try a.int("--sfu-room", range: 1...(1 << 53) - 1) ?? 1
        var server = SFUServer(url: url, room: UInt64(room), endToEndEncryption: !a.flag("--sfu-clear"))
        guard server.isUsable else {
            throw UsageError(description: "--sfu takes http://, https://, ws:// or wss:// HOST[:PORT][/PATH]")
        }
        server.apiSecret = try a.string("--sfu-api-secret").map { try readCredential($0, option: "--sfu-api-secret") }
        server.token = try a.string("--sfu-token").map { try readCredential($0, option: "--sfu-token") }
        server.roomSecret = try a.string("--sfu-room-secret").map { try readCredential($0, option: "--sfu-room-secret") }
        server.pin = try a.string("--sfu-pin").map { try readCredential($0, option: "--sfu-pin") }
        if let ca = a.string("--sfu-ca") {
            guard FileManager.default.isReadableFile(atPath: ca) else {
                throw InputError(description: "--sfu-ca \(ca): not readable")
            }
            server.certificateAuthorityFile = ca
        }
        o.sfu = server
    } else if a.string("--sfu-room") != nil || a.flag("--sfu-clear") {
        throw UsageError(description: "--sfu-room and --sfu-clear go with --sfu")
    } else if let stray = ["--sfu-api-secret", "--sfu-token", "--sfu-room-secret", "--sfu-pin", "--sfu-ca"].first(where: {
        a.string($0) != nil
    }) {
        throw UsageError(description: "\(stray) goes with --sfu")
    }
    return o
}

/// A credential read from a file (a secret on the command line would show in `ps`): its first
/// line without surrounding whitespace; an input error when it cannot be read, is empty or longer
/// than 4 KiB.
func readCredential(_ path: String, option: String) throws -> String {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw InputError(description: "\(option) \(path): cannot be read")
    }
    guard data.count <= 4096 else { throw InputError(description: "\(option) \(path): longer than 4 KiB") }
    let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map { $0.trimmingWhitespace } ?? ""
    guard !line.isEmpty else { throw InputError(description: "\(option) \(path): empty") }
    return line
}

/// The `--stun` and `--turn` values as servers: every `--stun` must be `HOST:PORT` and every
/// `--turn` `USER:PASS@HOST:PORT[?transport=tcp]` (or a `turn:`/`turns:` form, `RevueICEServer(parsing:)`),
/// else a usage error naming the option.
func iceServers(stun: [String], turn: [String]) throws -> [RevueICEServer] {
    var out: [RevueICEServer] = []
    for (option, values, kind) in [("--stun", stun, RevueICEServer.Kind.stun), ("--turn", turn, .turn)] {
        for text in values {
            let server: RevueICEServer
            do { server = try RevueICEServer(parsing: text) } catch {
                throw UsageError(description: "\(option) \(text): \(error.message)")
            }
            guard server.kind == kind else {
                throw UsageError(
                    description: kind == .stun
                        ? "--stun takes HOST:PORT (a TURN server goes in --turn)"
                        : "--turn takes USER:PASS@HOST:PORT[?transport=tcp]")
            }
            out.append(server)
        }
    }
    return out
}

/// The node's TURN offer from `--turn-url`, `--turn-secret` and `--turn-lifetime`: nil without
/// them; a usage error when only some are given, when they are given to a peer, or when a URL or
/// the secret file is refused (`TURNOffer`).
func turnOffer(urls: [String], secretFile: String?, lifetime: Int?, rendezvous: Bool) throws -> TURNOffer? {
    guard !urls.isEmpty || secretFile != nil || lifetime != nil else { return nil }
    guard rendezvous else {
        throw UsageError(description: "--turn-url, --turn-secret and --turn-lifetime go with a bare --rendezvous")
    }
    guard !urls.isEmpty, let secretFile else { throw UsageError(description: "--turn-url and --turn-secret go together") }
    do throws(RevueError) {
        let servers = try urls.map { (url: String) throws(RevueError) -> ICEServer in try TURNOffer.server(parsing: url) }
        let secret = try TURNOffer.readSecret(path: secretFile)
        return try TURNOffer(servers: servers, secret: secret, lifetime: UInt32(lifetime ?? Int(TURNOffer.defaultLifetime)))
    } catch {
        throw UsageError(description: error.message)
    }
}

let options: Options
do { options = try parseOptions() } catch { runTool("revue-node") { throw error } }

// MARK: - Rendezvous mode

@MainActor
func runRendezvous() {
    do {
        let node = try RendezvousNode(host: options.host, port: options.port)
        node.turnOffer = options.turnOffer
        nodeKeeper = node
        let turn = options.turnOffer.map { offer in
            NodeTURNOffer(
                servers: offer.servers.map { "\($0.address)" + ($0.transport == .tcp ? "?transport=tcp" : "") },
                lifetime: offer.lifetime)
        }
        emit(.ready(.rendezvous(port: node.port, turn: turn)))
    } catch {
        fail("\(error)", status: 1)
    }
}

var nodeKeeper: RendezvousNode?

// MARK: - Peer mode

/// The paths of `didUpdatePaths` and `list`.
func nodePaths(_ p: FriendConnectionPaths) -> [NodePath] { p.paths.map(NodePath.init) }

/// The participant a room event is about.
@MainActor
func nodeParticipant(_ p: Participant) -> NodeParticipant {
    NodeParticipant(friendId: p.identity, isLocal: p is LocalParticipant)
}

/// Turns delegate calls into event lines named after the delegate methods.
@MainActor
final class EventPrinter: RevueDelegate {
    func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String) {
        emit(.didReceiveFriendRequest(friendId: friendId, message: message))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateName name: String) {
        emit(.didUpdateName(friendId: friendId, name: name))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatusMessage statusMessage: String) {
        emit(.didUpdateStatusMessage(friendId: friendId, statusMessage: statusMessage))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatus status: UserStatus) {
        emit(.didUpdateStatus(friendId: friendId, status: status))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths) {
        emit(.didUpdatePaths(friendId: friendId, isOnline: paths.isOnline, paths: nodePaths(paths)))
    }
    func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String) {
        emit(.didReceiveMessage(friendId: friendId, message: message))
    }
    func revue(_ revue: Revue, didUpdateIsDiscoverable isDiscoverable: Bool) {
        emit(.didUpdateIsDiscoverable(isDiscoverable: isDiscoverable))
    }
    func revue(_ revue: Revue, friend friendId: String, didSendInvitation message: String?) {
        emit(.didSendInvitation(friendId: friendId, message: message))
    }
    func revue(_ revue: Revue, friend friendId: String, didReceiveInvitation message: String?) {
        emit(.didReceiveInvitation(friendId: friendId, message: message))
    }
    func revue(_ revue: Revue, friend friendId: String, didEndInvitation reason: InvitationEndReason) {
        emit(.didEndInvitation(friendId: friendId, reason: reason))
    }
}

/// Turns RoomDelegate calls into event lines named after the methods, with `"layer":"room"`.
@MainActor
final class RoomPrinter: RoomDelegate {
    /// Decoded video and audio per participant (by friend ID), for `media-stats`.
    var renderers: [String: LatestFrameRenderer] = [:]
    var audioSinks: [String: CountingAudioSink] = [:]
    func out(_ event: NodeRoomEvent) { emit(.room(event)) }
    func room(_ room: Room, participantDidConnect participant: RemoteParticipant) {
        out(.participantDidConnect(nodeParticipant(participant), mode: participant.mode))
    }
    func roomDidStartCall(_ room: Room) { out(.roomDidStartCall) }
    func roomDidEndCall(_ room: Room) { out(.roomDidEndCall) }
    func room(_ room: Room, callDidFailWithError error: CallError) { out(.callDidFailWithError(error)) }
    func room(_ room: Room, localParticipant: LocalParticipant, didFailToPublishTrack kind: TrackKind, error: TrackPublishError) {
        out(.didFailToPublishTrack(nodeParticipant(localParticipant), kind: kind, error: error))
    }
    func room(_ room: Room, participantDidDisconnect participant: RemoteParticipant) {
        out(.participantDidDisconnect(nodeParticipant(participant), reason: participant.disconnectReason))
    }
    func room(_ room: Room, participant: Participant, didUpdateConnectionQuality quality: ConnectionQuality) {
        out(.didUpdateConnectionQuality(nodeParticipant(participant), quality: quality))
    }
    func room(_ room: Room, participant: Participant, didUpdateName name: String?) {
        out(.didUpdateName(nodeParticipant(participant), name: name))
    }
    func room(_ room: Room, participant: Participant, didUpdateStatusMessage statusMessage: String?) {
        out(.didUpdateStatusMessage(nodeParticipant(participant), statusMessage: statusMessage))
    }
    func room(_ room: Room, participant: Participant, didUpdateStatus status: UserStatus) {
        out(.didUpdateStatus(nodeParticipant(participant), status: status))
    }
    func room(_ room: Room, localParticipant: LocalParticipant, didPublishTrack publication: LocalTrackPublication) {
        out(.didPublishTrack(nodeParticipant(localParticipant), sid: publication.sid, kind: publication.kind))
    }
    func room(_ room: Room, localParticipant: LocalParticipant, didUnpublishTrack publication: LocalTrackPublication) {
        out(.didUnpublishTrack(nodeParticipant(localParticipant), sid: publication.sid, kind: publication.kind))
    }
    func room(_ room: Room, participant: RemoteParticipant, didSubscribeTrack publication: RemoteTrackPublication) {
        // Count what arrives, so `media-stats` can tell a script that media flows.
        let key = participant.identity
        switch publication.kind {
        case .video:
            let r = renderers[key] ?? LatestFrameRenderer()
            renderers[key] = r
            publication.renderer = r
        case .audio:
            let sink = audioSinks[key] ?? CountingAudioSink()
            audioSinks[key] = sink
            publication.audioSink = sink
        }
        out(.didSubscribeTrack(nodeParticipant(participant), sid: publication.sid, kind: publication.kind))
    }
    func room(_ room: Room, participant: RemoteParticipant, didUnsubscribeTrack publication: RemoteTrackPublication) {
        out(.didUnsubscribeTrack(nodeParticipant(participant), sid: publication.sid, kind: publication.kind))
    }
    func room(_ room: Room, participant: Participant, trackPublication: TrackPublication, didUpdateIsMuted isMuted: Bool) {
        out(.didUpdateIsMuted(nodeParticipant(participant), sid: trackPublication.sid, isMuted: isMuted))
    }
    func room(_ room: Room, participant: RemoteParticipant, didReceiveMessage message: String) {
        out(.didReceiveMessage(nodeParticipant(participant), message: message))
    }
    func room(_ room: Room, participant: RemoteParticipant, didReceiveMuteRequest isMuted: Bool) {
        out(.didReceiveMuteRequest(nodeParticipant(participant), isMuted: isMuted))
    }
    func room(_ room: Room, didUpdateSpeakingParticipants speakers: [Participant]) {
        out(.didUpdateSpeakingParticipants(speakers: speakers.map(\.identity)))
    }
    func room(_ room: Room, participant: Participant, didUpdateMode mode: ParticipantMode) {
        out(.didUpdateMode(nodeParticipant(participant), mode: mode))
    }
}

let roomPrinter = RoomPrinter()

/// Counts decoded PCM samples and their peak, on the playout thread.
/// Sendable: the counts live in a `Mutex`.
final class CountingAudioSink: AudioSink, Sendable {
    private let state = Mutex((samples: 0, loud: 0))
    func play(_ s: Span<Int16>, sampleRate: Int, channels: Int) {
        var peak = 0
        for i in s.indices { peak = max(peak, abs(Int(s[i]))) }
        let count = s.count
        state.withLock {
            $0.samples += count
            if peak > 1000 { $0.loud += count }
        }
    }
    var counts: (samples: Int, loud: Int) { state.withLock { $0 } }
}

/// Feeds a tone and the synthetic test video into the local tracks in real time, off the main actor.
/// `done` receives how many video frames and audio samples were captured, and the most (ms) the
/// feed fell behind its schedule (a starved feed catches up in a burst, as no camera would).
func feedSynthetic(
    audio: AudioBufferCapturer?, video: BufferCapturer?, seconds: Double, tone: Double,
    done: @escaping @Sendable (Int, Int, Int) -> Void
) {
    _ = TransportThread(name: "revue-node.feed") {
        var framesFed = 0, samplesFed = 0, maxLagNs = 0
        let frame = VideoFrame(width: 320, height: 180)
        var pcm = [Int16](repeating: 0, count: 960)
        let start = DispatchTime.now().uptimeNanoseconds
        for chunk in 0..<Int(seconds * 50) {
            for i in 0..<960 { pcm[i] = Int16(12_000 * sin(2 * Double.pi * tone * Double(chunk * 960 + i) / 48_000)) }
            let ts = Int64(chunk) * 20_000_000
            if let audio {
                pcm.withUnsafeBufferPointer { audio.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: ts) }
                samplesFed += pcm.count
            }
            if chunk % 3 == 0, let video {
                SyntheticVideo.render(frameIndex: chunk / 3, into: frame)
                video.capture(PixelBufferView(frame.view), timeStampNs: ts)
                framesFed += 1
            }
            let due = start + UInt64(chunk + 1) * 20_000_000
            let now = DispatchTime.now().uptimeNanoseconds
            if due > now { usleep(UInt32((due - now) / 1000)) } else { maxLagNs = max(maxLagNs, Int(now - due)) }
        }
        done(framesFed, samplesFed, maxLagNs / 1_000_000)
    }
}

let printer = EventPrinter()

/// The call leg's ICE state for `media-stats`' `path` field: the selected pair (candidate types
/// and addresses), the route media takes, our candidates and check counters; nil without a leg.
@MainActor
func callLegPath(_ room: Room, friendId: String) -> NodeMediaPath? {
    room.mediaPathDiagnostics(friendId).map(NodeMediaPath.init)
}

@MainActor
func startPeer() {
    guard let data = options.data else { fail("--data DIR is required\nrun 'revue-node --help' for usage") }
    var config = RevueConfiguration(dataDirectory: data)
    config.bindHost = options.host
    config.port = options.port
    config.rendezvousNodes = options.rendezvousNodes
    config.iceServers = options.iceServers
    config.lanDiscovery = options.lan
    if let t = options.invitationTimeout { config.timeouts.invitationTimeout = t }
    if let t = options.callLostTimeout { config.timeouts.callLostTimeout = t }
    let revue = Revue.shared
    do {
        try revue.initialize(config)
    } catch {
        fail("\(error)", status: 1)
    }
    revue.delegates.add(delegate: printer)
    revue.room.delegates.add(delegate: roomPrinter)
    revue.room.options.mode = options.mode
    revue.room.options.micEnabled = options.mic
    revue.room.options.cameraEnabled = options.camera
    revue.room.options.sfu = options.sfu
    if let size = options.videoSize {
        revue.room.options.videoWidth = size.width
        revue.room.options.videoHeight = size.height
    }
    if let name = options.name { revue.setSelfName(name) }
    emit(.ready(.peer(address: revue.revueAddress, revueId: revue.revueId, port: revue.port, lan: revue.isDiscoveringOnLAN)))
}

/// The name revue-node reports for one of the SDK's typed errors (docs/revue-node.md): its case
/// name, without associated values. Exhaustive, so a new case cannot go unnamed.
protocol NodeErrorName: Error {
    var nodeName: String { get }
}

extension FriendAddError: NodeErrorName {
    var nodeName: String {
        switch self {
        case .alreadyExists: "alreadyExists"
        case .invalidAddress: "invalidAddress"
        case .badChecksum: "badChecksum"
        case .ownAddress: "ownAddress"
        case .messageTooLong: "messageTooLong"
        case .notInitialized: "notInitialized"
        case .storageFailed: "storageFailed"
        }
    }
}

extension FriendMessageError: NodeErrorName {
    var nodeName: String {
        switch self {
        case .friendNotReachable: "friendNotReachable"
        case .sendQueueFull: "sendQueueFull"
        case .timeout: "timeout"
        case .messageTooLong: "messageTooLong"
        case .friendNotFound: "friendNotFound"
        case .reservedFormat: "reservedFormat"
        }
    }
}

extension FriendCallError: NodeErrorName {
    var nodeName: String {
        switch self {
        case .invalidState: "invalidState"
        case .friendNotFound: "friendNotFound"
        case .friendNotReachable: "friendNotReachable"
        case .messageTooLong: "messageTooLong"
        }
    }
}

extension RoomLinkError: NodeErrorName {
    var nodeName: String {
        switch self {
        case .tooLong: "tooLong"
        case .invalidCharacter: "invalidCharacter"
        case .notARoomLink: "notARoomLink"
        case .badServer: "badServer"
        case .badRoom: "badRoom"
        case .missingField: "missingField"
        case .unknownField: "unknownField"
        case .duplicateField: "duplicateField"
        case .badField: "badField"
        case .missingSecret: "missingSecret"
        case .badSecret: "badSecret"
        case .badHostKey: "badHostKey"
        case .notInitialized: "notInitialized"
        case .inCall: "inCall"
        case .noServer: "noServer"
        case .tooManyLinks: "tooManyLinks"
        case .badName: "badName"
        }
    }
}

extension RoomError: NodeErrorName {
    var nodeName: String {
        switch self {
        case .alreadyInRequestedState: "alreadyInRequestedState"
        case .notInitialized: "notInitialized"
        }
    }
}

func errorName(_ error: some NodeErrorName) -> String { error.nodeName }

/// Runs one command line (parsed by RevueNodeProtocol's `NodeCommandLine`). Replies carry "cmd"
/// and, when given, the command's "id".
@MainActor
func run(_ line: String) {
    let request: NodeRequest
    switch NodeCommandLine.parse(line) {
    case .blank: return
    case .error(let e): return emit(e.event)
    case .request(let r): request = r
    }
    let revue = Revue.shared
    let friends = revue.friends
    let cmd = request.name
    let id = request.id
    func ok(_ result: NodeResult = .empty) { emit(.ok(NodeReply(cmd: cmd, id: id, result: result))) }
    /// A participant by friend ID (any case) or link identity (as given).
    func participant(_ id: String) -> RemoteParticipant? {
        revue.room.remoteParticipants[id] ?? revue.room.remoteParticipants[id.uppercased()]
    }
    func error(
        _ name: String, friendId: String? = nil, messageId: UInt32? = nil, sid: String? = nil, code: Int? = nil,
        detail: String? = nil
    ) {
        emit(
            .error(
                NodeErrorReply(
                    cmd: cmd, id: id, error: name, friendId: friendId, messageId: messageId, sid: sid, code: code,
                    detail: detail)))
    }
    switch request.command {
    case .address:
        ok(.identity(address: revue.revueAddress, revueId: revue.revueId, port: revue.port, nospam: revue.nospam))
    case .addFriend(let address, let message):
        do throws(FriendAddError) {
            ok(.friend(friendId: try friends.addFriend(address: address, message: message)))
        } catch let e {
            error(errorName(e))
        }
    case .accept(let friendId):
        do throws(FriendAddError) { ok(.friend(friendId: try friends.addFriendNorequest(friendId: friendId))) } catch let e {
            error(errorName(e))
        }
    case .delete(let friendId):
        do {
            try friends.deleteFriend(friendId: friendId)
            ok(.friend(friendId: friendId))
        } catch .notFound { error("notFound") } catch let e { error("failed", code: -1, detail: "\(e)") }
    case .setName(let name):
        revue.setSelfName(name)
        ok()
    case .setStatusMessage(let text):
        revue.setSelfStatusMessage(text)
        ok()
    case .setStatus(let status):
        revue.setSelfStatus(status)
        ok()
    case .setNospam(let v):
        revue.nospam = v
        ok(.address(revue.revueAddress))
    case .message(let friendId, let message, let timeout):
        Task { @MainActor in
            do throws(FriendMessageError) {
                let messageId = try await friends.sendMessage(friendId: friendId, message: message, timeout: timeout)
                ok(.messageSent(friendId: friendId, messageId: messageId))
            } catch .timeout(let messageId) {
                error("timeout", friendId: friendId, messageId: messageId)
            } catch let e {
                error(errorName(e), friendId: friendId)
            }
        }
    case .list:
        let list = friends.getFriendList().map { id in
            let paths = friends.getFriendPaths(friendId: id)
            return NodeFriend(
                friendId: id, name: friends.getFriendName(friendId: id),
                statusMessage: friends.getFriendStatusMessage(friendId: id), status: friends.getFriendStatus(friendId: id),
                isOnline: paths.isOnline, paths: nodePaths(paths), presence: friends.getFriendPresenceStatus(friendId: id))
        }
        ok(.friends(list))
    case .counters:
        ok(.counters(NodeCounters(revue.counters)))
    case .invite(let friendId, _), .acceptCall(let friendId), .rejectCall(let friendId), .cancelCall(let friendId):
        do throws(FriendCallError) {
            switch request.command {
            case .invite(_, let message): try friends.sendInvitation(friendId: friendId, message: message)
            case .acceptCall: try friends.acceptInvitation(friendId: friendId)
            case .rejectCall: try friends.rejectInvitation(friendId: friendId)
            default: try friends.cancelInvitation(friendId: friendId)
            }
            ok(.friend(friendId: friendId))
        } catch let e { error(errorName(e), friendId: friendId) }
    case .hangup(let friendId):
        if let friendId {
            guard let p = participant(friendId) else {
                return error("notInCall", friendId: friendId)
            }
            p.disconnect()
        } else {
            revue.room.disconnectAll()
        }
        ok()
    case .callMessage(let message, let toIds, let timeout):
        let to = toIds?.compactMap { participant($0) }
        Task { @MainActor in
            do throws(FriendMessageError) {
                let results = try await revue.room.localParticipant.sendMessage(message, to: to, timeout: timeout)
                var perRecipient: [String: String] = [:]
                for (id, result) in results {
                    switch result {
                    case .success: perRecipient[id] = "delivered"
                    case .failure(let e): perRecipient[id] = errorName(e)
                    }
                }
                ok(.callMessage(results: perRecipient))
            } catch let e { error(errorName(e)) }
        }
    case .muteRequest(let friendId, let isMuted):
        guard let friendId, let p = participant(friendId) else {
            return error("notInCall")
        }
        p.sendMuteRequest(isMuted: isMuted)
        ok()
    case .mic(let enabled):
        revue.room.localParticipant.setMicrophone(enabled: enabled)
        ok()
    case .camera(let enabled):
        revue.room.localParticipant.setCamera(enabled: enabled)
        ok()
    case .mute(let sid), .unmute(let sid):
        guard let pub = revue.room.localParticipant.localTrackPublications.first(where: { $0.sid == sid }) else {
            return error("notPublished", sid: sid)
        }
        if case .mute = request.command { pub.mute() } else { pub.unmute() }
        ok(.track(sid: sid))
    case .subscribe(let friendId, let sid, let subscribed):
        guard let friendId, let p = participant(friendId),
            let pub = p.remoteTrackPublications.first(where: { $0.sid == sid })
        else { return error("notFound") }
        pub.setSubscribed(subscribed)
        ok()
    case .mode(let mode):
        Task { @MainActor in
            do throws(RoomError) {
                try await revue.room.changeMode(mode)
                ok(.mode(mode))
            } catch let e { error(errorName(e)) }
        }
    case .feed(let seconds, let tone):
        let pubs = revue.room.localParticipant.localTrackPublications
        let audio = pubs.first { $0.kind == .audio }?.audioCapturer
        let video = pubs.first { $0.kind == .video }?.videoCapturer
        guard audio != nil || video != nil else { return error("notPublished") }
        feedSynthetic(audio: audio, video: video, seconds: seconds, tone: tone) { frames, samples, lagMs in
            emit(
                .ok(
                    NodeReply(
                        cmd: "feed", id: id,
                        result: .feed(videoFramesFed: frames, audioSamplesFed: samples, maxLagMilliseconds: lagMs))))
        }
    case .mediaStats:
        let list = revue.room.remoteParticipants.keys.sorted().map { id in
            let audio = roomPrinter.audioSinks[id]?.counts ?? (samples: 0, loud: 0)
            return NodeMediaParticipant(
                friendId: id, videoFrames: roomPrinter.renderers[id]?.frameCount ?? 0, audioSamples: audio.samples,
                loudSamples: audio.loud, path: callLegPath(revue.room, friendId: id))
        }
        let videoSend = revue.room.videoSendStatistics.map { v in
            let c = v.capture, o = v.outbound
            return NodeVideoSend(
                captured: Int(c.captured), droppedRingFull: Int(c.droppedRingFull),
                droppedPoolExhausted: Int(c.droppedPoolExhausted), droppedFrameRate: Int(c.droppedFrameRate),
                framesEncoded: Int(o.framesEncoded), framesDroppedByEncoder: Int(o.framesDroppedByEncoder),
                targetBitrate: Int(o.targetBitrate), pacerOverflows: Int(v.pacer?.overflows ?? 0))
        }
        ok(.mediaStats(NodeMediaStats(participants: list, uplinkBytes: revue.room.uplinkBytes, videoSend: videoSend)))
    case .createLink(let name):
        do throws(RoomLinkError) { ok(.link(try revue.room.createLink(name: name).text)) } catch let e {
            error(errorName(e))
        }
    case .joinLink(let text, let name):
        do throws(RoomLinkError) {
            try revue.room.joinRoom(link: try RoomLink(parsing: text), name: name)
            ok()
        } catch let e {
            error(errorName(e))
        }
    case .revokeLink(let text):
        guard let link = try? RoomLink(parsing: text), revue.room.revokeLink(link) else { return error("notFound") }
        ok()
    case .room:
        let room = revue.room
        func tracks(_ p: Participant) -> [NodeTrack] {
            p.trackPublications.values.sorted { $0.sid < $1.sid }.map { pub in
                NodeTrack(
                    sid: pub.sid, kind: pub.kind, isMuted: pub.isMuted,
                    isSubscribed: (pub as? RemoteTrackPublication)?.isSubscribed)
            }
        }
        let participants = room.remoteParticipants.values.sorted { $0.identity < $1.identity }.map { p in
            NodeRoomParticipant(
                friendId: p.identity, name: p.name, mode: p.mode, tracks: tracks(p), connectionQuality: p.connectionQuality,
                isSpeaking: p.isSpeaking, byLink: room.isLinkParticipant(p))
        }
        ok(
            .room(
                NodeRoomState(
                    participants: participants, mode: room.localParticipant.mode, tracks: tracks(room.localParticipant),
                    activeSpeakers: room.activeSpeakers.map(\.identity))))
    case .quit:
        revue.destroy()
        ok()
        exit(0)
    }
}

/// Reads stdin on its own thread; each line is run on the main actor, in order. EOF quits.
func readCommands() {
    _ = TransportThread(name: "revue-node.stdin") {
        while let line = readLine(strippingNewline: true) {
            DispatchQueue.main.async { MainActor.assumeIsolated { run(line) } }
        }
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                Revue.shared.destroy()
                exit(0)
            }
        }
    }
}

MainActor.assumeIsolated {
    if options.serveRendezvous && options.data == nil {
        runRendezvous()
    } else {
        startPeer()
        readCommands()
    }
}
dispatchMain()
