import Foundation
import MediaCore
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

/// Persistence: the data directory and the profile file against another local user, and the
/// secret key sealed at rest with a passphrase.
@MainActor
@Suite(.serialized) struct AttackPersistenceTests {
    func freshDirectory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("revue-persist-\(UUID().uuidString)").path
    }

    func initialize(_ dir: String, passphrase: String? = nil) -> Result<Revue, RevueError> {
        var c = RevueConfiguration(dataDirectory: dir)
        c.bindHost = "127.0.0.1"
        c.profilePassphrase = passphrase
        let r = Revue()
        do throws(RevueError) {
            try r.initialize(c)
            return .success(r)
        } catch {
            return .failure(error)
        }
    }

    func mode(_ path: String) -> mode_t {
        var st = stat()
        stat(path, &st)
        return st.st_mode & 0o777
    }

    @Test func aSymlinkPlantedAtTheTempFileIsNotWrittenThrough() throws {
        let dir = freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try initialize(dir).get()
        first.destroy()
        let target = dir + "-target"
        defer { unlink(target) }
        try Data("untouched".utf8).write(to: URL(fileURLWithPath: target))
        #expect(symlink(target, dir + "/profile.json.tmp") == 0)
        let r = try initialize(dir).get()
        r.setSelfName("planted")
        r.destroy()
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "untouched")
        #expect(try String(contentsOfFile: dir + "/profile.json", encoding: .utf8).contains("planted"))
        var st = stat()
        #expect(lstat(dir + "/profile.json.tmp", &st) != 0, "no temp file left")
    }

    @Test func aSymlinkPlantedAtTheProfileIsReplacedNotFollowed() throws {
        let dir = freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let target = dir + "-elsewhere"
        defer { unlink(target) }
        #expect(symlink(target, dir + "/profile.json") == 0)
        let r = try initialize(dir).get()
        r.setSelfName("replaced")
        r.destroy()
        var st = stat()
        #expect(lstat(target, &st) != 0, "nothing written through the link")
        #expect(lstat(dir + "/profile.json", &st) == 0)
        #expect(st.st_mode & S_IFMT == S_IFREG, "the link itself replaced by the profile")
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(try String(contentsOfFile: dir + "/profile.json", encoding: .utf8).contains("replaced"))
    }

    @Test func aSymlinkPlantedAtTheLockFileIsRefusedNotFollowed() throws {
        let dir = freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let target = dir + "-lock-target"
        defer { unlink(target) }
        #expect(symlink(target, dir + "/lock") == 0)
        guard case .failure(let e) = initialize(dir) else {
            Issue.record("a data directory whose lock is a symbolic link was accepted")
            return
        }
        #expect(e.code == .dataDirectory, "\(e)")
        #expect(e.description.contains("lock"), "\(e)")
        var st = stat()
        #expect(lstat(target, &st) != 0, "nothing created through the link")
    }

    @Test func theProfileIsWrittenWithMode0600WhateverTheUmask() throws {
        let dir = freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let old = umask(0)
        defer { umask(old) }
        let r = try initialize(dir).get()
        r.setSelfName("umask")
        r.destroy()
        #expect(mode(dir + "/profile.json") == 0o600)
    }

    @Test func dataDirectoryPermissionsAreChecked() throws {
        let dir = freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chmod(dir, 0o777)
        guard case .failure(let e) = initialize(dir) else { Issue.record("a world-writable directory was accepted"); return }
        #expect(e.code == .dataDirectory, "\(e)")
        chmod(dir, 0o755)
        let r = try initialize(dir).get()
        r.destroy()
        #expect(mode(dir) == 0o700, "read access for others removed")
        #expect(mode(dir + "/profile.json") == 0o600)
        if geteuid() == 0 {
            chown(dir, 65_534, 65_534)
            guard case .failure(let e) = initialize(dir) else { Issue.record("another user's directory was accepted"); return }
            #expect(e.code == .dataDirectory, "\(e)")
        } else {
            print("skipped the other-owner case: needs root to chown")
        }
    }

    @Test func secretKeySealedWithAPassphrase() throws {
        let saved = ProfileStore.sealingLimits
        ProfileStore.sealingLimits = (1, 1 << 20)  // fast for the test; the default is Argon2id "moderate"
        defer { ProfileStore.sealingLimits = saved }
        let dir = freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try initialize(dir, passphrase: "correct horse").get()
        let id = r.revueId
        let secretHex = Hex.encode(r.core!.identity.secret.exposedCopy)
        r.destroy()
        let text = try String(contentsOfFile: dir + "/profile.json", encoding: .utf8)
        #expect(!text.lowercased().contains(secretHex.lowercased()), "no clear secret on disk")
        #expect(text.contains("sealedSecretKey"))
        for wrong in [nil, "wrong horse"] {
            guard case .failure(let e) = initialize(dir, passphrase: wrong) else {
                Issue.record("opened with \(wrong ?? "no passphrase")"); continue
            }
            #expect(e.code == .corruptProfile, "\(e)")
        }
        #expect(try String(contentsOfFile: dir + "/profile.json", encoding: .utf8) == text, "a failed open leaves the file as is")
        let again = try initialize(dir, passphrase: "correct horse").get()
        #expect(again.revueId == id)
        again.destroy()

        // A clear profile opened with a passphrase is sealed at once.
        let clearDir = freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: clearDir) }
        let clear = try initialize(clearDir).get()
        let clearSecret = Hex.encode(clear.core!.identity.secret.exposedCopy)
        clear.destroy()
        #expect(
            try String(contentsOfFile: clearDir + "/profile.json", encoding: .utf8).lowercased().contains(
                clearSecret.lowercased()))
        let sealing = try initialize(clearDir, passphrase: "p").get()
        #expect(
            !(try String(contentsOfFile: clearDir + "/profile.json", encoding: .utf8).lowercased().contains(
                clearSecret.lowercased())))
        sealing.destroy()
    }
}
