#if canImport(Glibc)
    import Testing
    import Foundation
    import Glibc
    @testable import MediaCore

    /// `AtomicFileWriter` with the options the profile needs: no symbolic link followed, nothing
    /// half-written left behind, the mode set exactly.
    @Suite struct AtomicFileWriterTests {
        static func freshDirectory() -> String { SystemLayerTests.freshDirectory() }
        static func contents(_ dir: String) -> [String] { SystemLayerTests.contents(dir) }

        @Test func atomicWriterDoesNotFollowALinkAtTheTemporaryName() throws {
            let dir = Self.freshDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let target = dir + "/target"
            try Data("untouched".utf8).write(to: URL(fileURLWithPath: target))
            #expect(symlink(target, dir + "/out.tmp") == 0)
            try AtomicFileWriter.write(Array("new".utf8), to: dir + "/out", mode: 0o600, temporaryPath: dir + "/out.tmp")
            #expect(try String(contentsOfFile: target, encoding: .utf8) == "untouched")
            #expect(try String(contentsOfFile: dir + "/out", encoding: .utf8) == "new")
            #expect(Self.contents(dir) == ["out", "target"], "no temporary file left")
        }

        @Test func atomicWriterReplacesALinkAtTheDestinationItself() throws {
            let dir = Self.freshDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let target = dir + "/target"
            try Data("untouched".utf8).write(to: URL(fileURLWithPath: target))
            #expect(symlink(target, dir + "/out") == 0)
            try AtomicFileWriter.write(Array("new".utf8), to: dir + "/out")
            #expect(try String(contentsOfFile: target, encoding: .utf8) == "untouched")
            var st = stat()
            #expect(lstat(dir + "/out", &st) == 0 && st.st_mode & S_IFMT == S_IFREG)
            #expect(try String(contentsOfFile: dir + "/out", encoding: .utf8) == "new")
        }

        @Test func aDirectoryAtTheTemporaryNameFailsTheWrite() throws {
            let dir = Self.freshDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try FileManager.default.createDirectory(atPath: dir + "/out.tmp", withIntermediateDirectories: false)
            #expect(throws: AtomicFileError.self) {
                try AtomicFileWriter.write(Array("new".utf8), to: dir + "/out", temporaryPath: dir + "/out.tmp")
            }
            #expect(!FileManager.default.fileExists(atPath: dir + "/out"))
        }

        @Test func anAbortedWriteLeavesNoFile() throws {
            let dir = Self.freshDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let file = try AtomicFileWriter(path: dir + "/out", bufferCapacity: 4)
            try file.write(Array("more than the buffer".utf8))
            #expect(FileManager.default.fileExists(atPath: file.temporaryPath))
            file.abort()
            #expect(Self.contents(dir).isEmpty, "neither the destination nor the temporary file")
            // An old file under the name stays as it was.
            try AtomicFileWriter.write(Array("old".utf8), to: dir + "/out")
            do {
                let again = try AtomicFileWriter(path: dir + "/out", temporaryPath: dir + "/out.tmp")
                try again.write(Array("half".utf8))
            }  // deinit without finish
            #expect(Self.contents(dir) == ["out"])
            #expect(try String(contentsOfFile: dir + "/out", encoding: .utf8) == "old")
        }

        @Test func atomicWriterSetsTheModeExactly() throws {
            let dir = Self.freshDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let old = umask(0o077)
            defer { umask(old) }
            try AtomicFileWriter.write(Array("a".utf8), to: dir + "/public", mode: 0o644)
            try AtomicFileWriter.write(Array("b".utf8), to: dir + "/secret", mode: 0o600, temporaryPath: dir + "/secret.tmp")
            var st = stat()
            #expect(stat(dir + "/public", &st) == 0 && st.st_mode & 0o777 == 0o644)
            #expect(stat(dir + "/secret", &st) == 0 && st.st_mode & 0o777 == 0o600)
        }
    }
#endif
