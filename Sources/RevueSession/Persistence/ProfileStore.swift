// The data directory: profile.json (keys, nospam, profile, friend list, per-friend stream state),
// written atomically by `AtomicFileWriter` (temp file, fsync, rename, fsync of the directory) with
// mode 0600, and a lock file so two processes never share one identity.
import Dispatch
internal import MediaCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// What survives a restart. Codable; the file is JSON so an operator can read it.
struct StoredProfile: Codable, Equatable {
    struct Friend: Codable, Equatable {
        var id: String
        var name: String = ""
        var statusMessage: String = ""
        var status: UInt8 = 0
        /// Last endpoint that carried authenticated traffic ("ip:port").
        var endpoint: String?
        /// Set while our friend request has not been answered by a connection.
        var requestNospam: UInt32?
        var requestMessage: String?
        /// Inbound reliable stream: the sender's epoch and the last sequence delivered to the app.
        var inboundEpoch: UInt32 = 0
        var inboundDelivered: UInt32 = 0
        /// No handshake initiation from this friend at or below this timestamp is accepted after a
        /// restart: a reservation at or above every one we answered, written before the answer
        /// (`SessionCore.handshakeReservation` ahead of the one that made us write it).
        var handshakeTimestamp: UInt64?
    }

    /// The secret key sealed with a passphrase (`RevueConfiguration.profilePassphrase`): Argon2id
    /// (`crypto_pwhash`) of the passphrase with `salt` is the key of an XSalsa20-Poly1305 box
    /// (`crypto_secretbox`) holding the 32-byte secret. `secretKey` is empty then.
    struct SealedSecret: Codable, Equatable {
        var salt: String
        var box: String
        var opsLimit: UInt64
        var memLimit: Int
    }

    var format: Int = 1
    /// The X25519 secret in hexadecimal; empty in the file when `sealedSecretKey` holds it.
    var secretKey: String
    var sealedSecretKey: SealedSecret?
    var nospam: UInt32
    var name: String = ""
    var statusMessage: String = ""
    var status: UInt8 = 0
    var friends: [Friend] = []
}

/// Reads and writes `profile.json` in the data directory. Main actor (called by the session core);
/// the writes themselves (with their fsyncs) run on a private serial queue, in order, so the main
/// actor does not wait for the disk unless it asks to (`save`).
@MainActor
final class ProfileStore {
    let directory: String
    private var lockFile: FileDescriptor?
    nonisolated var path: String { directory + "/profile.json" }
    private let io = DispatchQueue(label: "revue.profile")
    private var writing = false
    private var nextData: Data?
    private var nextCompletions: [(Bool) -> Void] = []
    private var inFlightCompletions: [(Bool) -> Void] = []
    /// The passphrase the secret key is sealed with at rest; nil keeps it in clear (the default).
    private let passphrase: String?
    /// The identity's secret, written into each save (the in-memory profile keeps no copy).
    var secret: SecretKeyBytes?
    /// Where queued writes report back: the session's scheduler. With a simulated clock
    /// (`SessionEnvironment.simulatedDisk`), a queued write runs at once on the caller's thread and
    /// its completion comes `queuedWriteDelayForTesting` later on that clock.
    var scheduler: any TaskScheduler = DispatchTaskScheduler.main
    var simulatedDisk = false
    /// The sealed secret written instead of the clear one (made once per run: Argon2id is slow).
    private var sealed: StoredProfile.SealedSecret?
    /// Argon2id limits for newly sealed keys: libsodium's "moderate" ones (256 MiB, about a second).
    /// Tests lower them.
    static var sealingLimits = Sodium.passphraseLimits

    /// Creates the directory if needed (mode 0700) and takes its lock. An existing directory must
    /// belong to this user and not be writable by others; read or search permission for others is
    /// removed (the profile holds the secret key).
    init(directory: String, passphrase: String? = nil) throws(RevueError) {
        self.directory = directory
        self.passphrase = passphrase
        var isDir = false
        if !FileManager.default.fileExists(atPath: directory, isDirectory: &isDir) {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            } catch {
                throw RevueError(.dataDirectory, "cannot create data directory \(directory): \(error)")
            }
        } else if !isDir {
            throw RevueError(.dataDirectory, "data directory \(directory) is a file")
        }
        var st = stat()
        guard stat(directory, &st) == 0 else {
            throw RevueError(.dataDirectory, "cannot stat \(directory): \(String(cString: strerror(errno)))")
        }
        guard st.st_uid == geteuid() else {
            throw RevueError(.dataDirectory, "data directory \(directory) belongs to another user (uid \(st.st_uid))")
        }
        guard st.st_mode & 0o022 == 0 else {
            throw RevueError(
                .dataDirectory,
                "data directory \(directory) is writable by other users (mode \(String(st.st_mode & 0o777, radix: 8))); chmod 700 it"
            )
        }
        if st.st_mode & 0o077 != 0 { chmod(directory, 0o700) }
        let lock: FileDescriptor
        do {
            lock = try FileDescriptor.open(
                directory + "/lock", .readWrite, options: [.create, .closeOnExec, .noFollow], permissions: 0o600)
        } catch {
            throw RevueError(.dataDirectory, "cannot open \(directory)/lock: \(error)")
        }
        let locked: Bool
        do {
            locked = try lock.tryLockExclusive()
        } catch {
            try? lock.close()
            throw RevueError(.dataDirectory, "cannot lock \(directory)/lock: \(error)")
        }
        guard locked else {
            try? lock.close()
            throw RevueError(.dataDirectory, "data directory \(directory) is in use by another Revue instance")
        }
        lockFile = lock
    }

    /// Waits for queued writes, then releases the lock.
    func close() {
        io.sync {}
        if let lock = lockFile {
            try? lock.unlock()
            try? lock.close()
            lockFile = nil
        }
    }

    isolated deinit {
        try? lockFile?.close()
    }

    /// The stored profile, nil when there is none yet; throws `.corruptProfile` when a file exists
    /// but is not a valid profile (never silently replaced).
    func load() throws(RevueError) -> StoredProfile? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw RevueError(.corruptProfile, "\(path) exists but cannot be read")
        }
        var profile: StoredProfile
        do {
            profile = try JSONDecoder().decode(StoredProfile.self, from: data)
        } catch {
            throw RevueError(
                .corruptProfile, "\(path) is not a valid Revue profile (\(error)); move it away to start with a new identity")
        }
        guard profile.format == 1 else {
            throw RevueError(.corruptProfile, "\(path) has format \(profile.format); this build reads format 1")
        }
        if let box = profile.sealedSecretKey {
            guard let passphrase else {
                throw RevueError(.corruptProfile, "\(path) is sealed with a passphrase; set RevueConfiguration.profilePassphrase")
            }
            guard let salt = Hex.decode(box.salt), salt.count == Sodium.passphraseSaltLength,
                let sealedBytes = Hex.decode(box.box),
                box.opsLimit >= 1, box.memLimit >= 8192, box.memLimit <= 1 << 32
            else {
                throw RevueError(.corruptProfile, "\(path): sealedSecretKey is malformed")
            }
            guard let key = Sodium.passphraseKey(passphrase, salt: salt, opsLimit: box.opsLimit, memLimit: box.memLimit) else {
                throw RevueError(.corruptProfile, "\(path): not enough memory to derive the passphrase key")
            }
            guard let secret = Sodium.secretboxOpen(key: key, sealedBytes), secret.count == 32 else {
                throw RevueError(.corruptProfile, "\(path): the passphrase does not open the sealed secret key")
            }
            profile.secretKey = Hex.encode(secret)
            sealed = box
        }
        guard let key = Hex.decode(profile.secretKey), key.count == 32 else {
            throw RevueError(.corruptProfile, "\(path): secretKey is not 64 hexadecimal digits")
        }
        for f in profile.friends where RevueAddress.parseFriendId(f.id) == nil {
            throw RevueError(.corruptProfile, "\(path): friend id '\(f.id)' is not 64 hexadecimal digits")
        }
        if passphrase != nil, profile.sealedSecretKey == nil {
            // A clear profile opened with a passphrase is sealed now.
            guard save(profile) else { throw RevueError(.dataDirectory, "cannot rewrite \(path) sealed") }
        } else if passphrase == nil, profile.sealedSecretKey == nil {
            chmod(path, 0o600)
        }
        return profile
    }

    /// The file's bytes: with a passphrase, the secret key only in its sealed form.
    func encode(_ profile: StoredProfile) -> Data? {
        var profile = profile
        if profile.secretKey.isEmpty, let secret { profile.secretKey = Hex.encode(secret.exposedCopy) }
        if let passphrase {
            if sealed == nil {
                let salt = RandomBytes.bytes(Sodium.passphraseSaltLength)
                let limits = Self.sealingLimits
                guard var secret = Hex.decode(profile.secretKey),
                    let key = Sodium.passphraseKey(passphrase, salt: salt, opsLimit: limits.ops, memLimit: limits.mem)
                else { return nil }
                sealed = StoredProfile.SealedSecret(
                    salt: Hex.encode(salt), box: Hex.encode(Sodium.secretbox(key: key, secret)),
                    opsLimit: limits.ops, memLimit: limits.mem)
                Sodium.wipe(&secret)
            }
            profile.secretKey = ""
            profile.sealedSecretKey = sealed
        } else {
            profile.sealedSecretKey = nil
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try? encoder.encode(profile)
    }

    /// Writes the profile now and waits for the disk; false (old file kept) when any step fails.
    /// Writes queued before it land first; a queued newer-than-disk snapshot is superseded.
    @discardableResult
    func save(_ profile: StoredProfile) -> Bool {
        guard let data = encode(profile) else { return false }
        nextData = nil
        let completions = nextCompletions
        nextCompletions = []
        let path = self.path, directory = self.directory
        let ok = io.sync { ProfileStore.write(data, path: path, directory: directory) }
        for c in completions { c(ok) }
        return ok
    }

    /// Queues a write of the profile; `completion` runs on the main actor once a snapshot at least
    /// this new is on disk. Bursts coalesce into one write.
    func saveSoon(_ profile: StoredProfile, completion: @escaping (Bool) -> Void) {
        guard let data = encode(profile) else { return completion(false) }
        nextData = data
        nextCompletions.append(completion)
        startWrite()
    }

    /// Test seams: writes queued by `saveSoon` that completed, and a delay added to each (a slow disk).
    package private(set) var queuedWritesCompleted = 0
    package var queuedWriteDelayForTesting = Duration.zero

    private func startWrite() {
        guard !writing, let data = nextData else { return }
        writing = true
        nextData = nil
        inFlightCompletions = nextCompletions
        nextCompletions = []
        let path = self.path, directory = self.directory, delay = queuedWriteDelayForTesting
        if simulatedDisk {
            let ok = ProfileStore.write(data, path: path, directory: directory)
            scheduler.schedule(after: delay) { MainActor.assumeIsolated { self.finishWrite(ok) } }
            return
        }
        io.async {
            if delay > .zero { usleep(UInt32(delay.inNanoseconds / 1_000)) }
            let ok = ProfileStore.write(data, path: path, directory: directory)
            DispatchQueue.main.async { MainActor.assumeIsolated { self.finishWrite(ok) } }
        }
    }

    /// A queued write ended: its completions run, and the next queued snapshot (if any) starts.
    private func finishWrite(_ ok: Bool) {
        queuedWritesCompleted += 1
        writing = false
        let completions = inFlightCompletions
        inFlightCompletions = []
        for c in completions { c(ok) }
        startWrite()
    }

    /// The atomic write, through `AtomicFileWriter` with mode 0600 and the fixed temporary name
    /// `profile.json.tmp`: what is there is unlinked (a leftover of a crash, or something planted:
    /// removed, never followed), the new temporary file is created with `O_EXCL | O_NOFOLLOW`, then
    /// fsync, rename over profile.json, fsync of the directory. False (old file kept) when any step
    /// fails.
    nonisolated static func write(_ data: Data, path: String, directory: String) -> Bool {
        do throws(AtomicFileError) {
            try AtomicFileWriter.write(data, to: path, mode: 0o600, temporaryPath: path + ".tmp")
            return true
        } catch {
            return false
        }
    }
}
