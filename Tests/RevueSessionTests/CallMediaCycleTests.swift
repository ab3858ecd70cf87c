import CMediaShims
import Foundation
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

/// Threads of this process (entries of /proc/self/task).
func processThreadCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
}

/// Open file descriptors of this process (entries of /proc/self/fd, less the one listing it).
func processDescriptorCount() -> Int {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0) - 1
}

/// Resident set size in kB (VmRSS of /proc/self/status), after glibc returned free memory of every
/// arena to the system (`malloc_trim`), so freed-but-cached memory does not count as a leak.
func residentKilobytes() -> Int {
    // malloc_trim is not in the Glibc module map: look it up (RTLD_DEFAULT is a null handle).
    if let sym = dlsym(nil, "malloc_trim") {
        _ = unsafeBitCast(sym, to: (@convention(c) (Int) -> Int32).self)(0)
    }
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return -1 }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? -1
}

@MainActor
@Suite(.serialized) struct CallMediaCycleTests {
    /// 20 calls with media (send streams with their worker threads, media sockets, SRTP contexts),
    /// each hung up: threads, open descriptors (media sockets) and the heap in use come back to where they
    /// were after the first calls.
    @Test func twentyCallCyclesLeakNoThreadsAndNoMemory() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        weak var lastParticipant: RemoteParticipant?
        var threadsAfterWarmup = 0, rssAfterWarmup = 0, heapAfterWarmup = 0, descriptorsAfterWarmup = 0
        for cycle in 0..<20 {
            let (caller, callee) = cycle % 2 == 0 ? (a, b) : (b, a)
            try caller.friends.sendInvitation(friendId: callee.id, message: "\(cycle)")
            await callee.wait("invited \(cycle)") { callee.room.invitations[caller.id] != nil }
            try callee.friends.acceptInvitation(friendId: caller.id)
            await caller.wait("media \(cycle)") { caller.room.localMedia.count == 2 && callee.room.localMedia.count == 2 }
            await caller.wait("legs \(cycle)") {
                caller.room.legs[callee.id]?.destination != nil && callee.room.legs[caller.id]?.destination != nil
            }
            lastParticipant = callee.room.remoteParticipants[caller.id]
            weak let stream = caller.room.localMedia[.video]?.video
            weak let leg = caller.room.legs[callee.id]
            weak let pub = caller.room.localParticipant.localTrackPublications.first
            defer {
                #expect(stream == nil && leg == nil && pub == nil, "cycle \(cycle): stream, leg or publication outlived the call")
            }
            callee.room.disconnectAll()
            await caller.wait("hung up \(cycle)") {
                caller.room.remoteParticipants.isEmpty && callee.room.remoteParticipants.isEmpty
            }
            await settle(0.1)
            // Measured after a longer warm-up: the allocator's arenas and glibc's cache of thread
            // stacks (each call starts and ends six threads, pacers included) settle by then.
            if cycle == 7 {
                threadsAfterWarmup = processThreadCount()
                rssAfterWarmup = residentKilobytes()
                heapAfterWarmup = cms_heap_bytes_in_use() / 1024
                descriptorsAfterWarmup = processDescriptorCount()
            }
        }
        await settle(0.5)
        #expect(lastParticipant == nil, "a RemoteParticipant outlived its call")
        #expect(a.room.localMedia.isEmpty && b.room.localMedia.isEmpty && a.room.legs.isEmpty && b.room.legs.isEmpty)
        let threads = processThreadCount(), rss = residentKilobytes(), descriptors = processDescriptorCount()
        // Each call opens a media socket per leg on both sides (and the DTLS/SRTP state with it);
        // a socket left open would add two per cycle, 24 in all. A few are allowed for the
        // runtime's own (Dispatch, timers).
        #expect(descriptors <= descriptorsAfterWarmup + 4, "descriptors \(descriptorsAfterWarmup) -> \(descriptors)")
        // Each call starts 6 send threads (2 video workers, their 2 pacers, 2 audio workers); a
        // leak would add 6 per cycle, 72 in all. Dispatch's own pool may grow by a couple.
        #expect(threads <= threadsAfterWarmup + 3, "threads \(threadsAfterWarmup) -> \(threads)")
        // The allocator's bytes in use, not the resident size: glibc keeps freed memory and the
        // stacks of ended threads cached, and how much depends on how the threads were scheduled
        // (resident size grew 5 MB here in a quiet run and 23 MB in a loaded one, with no leak).
        // One call holds about 33 MB of heap (two VP8 and two Opus encoders, decoders, buffers);
        // after the warm-up the heap grows about 6 kB a cycle (the recorders' event lists among
        // it). 1 MB over 12 calls leaves room for that and fails on any call's state kept.
        let heap = cms_heap_bytes_in_use() / 1024
        #expect(
            heap - heapAfterWarmup < 1_024,
            "heap in use \(heapAfterWarmup) kB -> \(heap) kB (resident \(rssAfterWarmup) kB -> \(rss) kB)")
    }
}
