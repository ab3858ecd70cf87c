// The entry point of the session layer: initialization, configuration and friends.

/// One Revue peer: your identity, your friends and their events. Use `Revue.shared` in an App;
/// tests and bots can make independent instances, each with its own data directory and UDP socket.
/// Main actor only. Call `initialize(_:)` before anything else and `destroy()` when done.
@MainActor
public final class Revue {
    /// The instance an App uses.
    public static let shared = Revue()

    /// The delegates that receive friend events; weak references. `destroy()` empties the list.
    public let delegates = DelegateList<any RevueDelegate>()

    /// Friend requests, the friend list and friend messages.
    public private(set) lazy var friends = FriendManager(revue: self)

    package var core: SessionCore?

    /// The call of this instance (`Room.shared` for `Revue.shared`). Kept across
    /// `initialize`/`destroy`; `destroy()` ends the call and empties its delegate lists.
    public private(set) lazy var room = Room(revue: self)

    /// Makes an uninitialized instance.
    public nonisolated init() {}

    /// Whether `initialize(_:)` succeeded and `destroy()` has not run since.
    public var isInitialized: Bool { core != nil }

    /// Loads (or creates) the identity in the data directory, binds the UDP socket and starts
    /// connecting to friends. Throws `RevueError` (data directory in use, corrupt profile, socket).
    /// Cost: one file read, one socket; the first run also writes a new key pair.
    public func initialize(_ configuration: RevueConfiguration) throws(RevueError) {
        try initialize(configuration, environment: .live)
    }

    /// `initialize(_:)` on another clock, socket and disk (tests: a simulated clock and network).
    package func initialize(_ configuration: RevueConfiguration, environment: SessionEnvironment) throws(RevueError) {
        guard core == nil else { throw RevueError(.alreadyInitialized, "initialize(_:) called twice without destroy()") }
        let core = try SessionCore(revue: self, configuration: configuration, environment: environment)
        self.core = core
        room.attach(core)
        core.start()
    }

    /// Tells connected friends you are leaving, closes the socket and the data directory, and
    /// removes every delegate. Pending `sendMessage` calls end with `.timeout`. Safe to call twice.
    public func destroy() {
        if core != nil { room.detach(polite: true) }
        core?.shutdown()
        core = nil
        delegates.removeAll()
    }

    /// Ends the instance the way a crash would (no goodbye to friends, no final save); tests use
    /// it to check what survives and how fast friends notice.
    func abandonForTesting() {
        if core != nil { room.detach(polite: false) }
        core?.abandon()
        core = nil
        delegates.removeAll()
    }

    /// Your address to give to others (76 hexadecimal digits: key, nospam, checksum); "" before
    /// `initialize(_:)`.
    public var revueAddress: String { core?.address ?? "" }

    /// Your identity: your public key (64 hexadecimal digits), the friend ID others see; "" before
    /// `initialize(_:)`.
    public var revueId: String { core?.ownId ?? "" }

    /// The nospam part of your address. Setting it changes `revueAddress` (not your identity);
    /// requests sent to an older address are then ignored.
    public var nospam: UInt32 {
        get { core?.profile.nospam ?? 0 }
        set { core?.setNospam(newValue) }
    }

    /// The UDP port the instance listens on (0 before `initialize(_:)`).
    public var port: UInt16 { core?.socket.localPort ?? 0 }

    /// Whether others can find you now (see `RevueDelegate.revue(_:didUpdateIsDiscoverable:)`).
    public var isDiscoverable: Bool { core?.isDiscoverable ?? false }

    /// Whether LAN discovery runs: `RevueConfiguration.lanDiscovery` is on, the instance carries
    /// IPv4, and its socket bound `lanDiscoveryPort` and joined the multicast group. False when
    /// another program holds that port without sharing it (`SO_REUSEPORT`) or the host has no IPv4
    /// multicast route; friends are then found through rendezvous nodes only. Main actor; cheap.
    public var isDiscoveringOnLAN: Bool { core?.lanSocket != nil }

    /// What the session layer dropped or handled so far.
    public var counters: RevueCounters { core?.counters ?? RevueCounters() }

    /// Your name as friends see it.
    public var selfName: String { core?.profile.name ?? "" }
    /// Your status message as friends see it.
    public var selfStatusMessage: String { core?.profile.statusMessage ?? "" }
    /// Your status as friends see it.
    public var selfStatus: UserStatus { core.flatMap { UserStatus(rawValue: $0.profile.status) } ?? .none }

    /// Sets your name; friends receive `didUpdateName`, and so do your own delegates, once, with
    /// your own `revueId`. Setting the same name again does nothing. Friends receive at most the
    /// first 512 UTF-8 bytes, cut between characters (never inside one).
    public func setSelfName(_ name: String) { core?.setSelfName(name) }

    /// Sets your status message; friends and your own delegates receive `didUpdateStatusMessage`.
    /// Friends receive at most the first 512 UTF-8 bytes, cut between characters.
    public func setSelfStatusMessage(_ statusMessage: String) { core?.setSelfStatusMessage(statusMessage) }

    /// Sets your status; friends and your own delegates receive `didUpdateStatus`.
    public func setSelfStatus(_ status: UserStatus) { core?.setSelfStatus(status) }
}
