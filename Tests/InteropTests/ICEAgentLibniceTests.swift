// The ICE agent against libnice, an independent ICE implementation (the one GStreamer's webrtcbin
// uses), driven through ctypes by a small Python program: both roles, over loopback. The two agents
// exchange credentials and candidates as signalling would, check each other, select a pair, and
// media sent on our path reaches libnice and its echo comes back.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(
    .serialized,
    .enabled(
        if: FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/libnice.so.10")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"),
        "needs libnice (libnice10) and python3"))
struct ICEAgentLibniceTests {
    /// A libnice agent in a Python process: lines in (`CRED u p`, `CAND a=candidate:...`, `END`,
    /// `QUIT`), lines out (`CRED`, `CAND`, `GATHERED`, `STATE n`, `RECV n`).
    final class NicePeer: @unchecked Sendable {
        let process = Process()
        let input = Pipe(), output = Pipe()
        let lines = Mutex<[String]>([])
        let dir = InteropTempDir()

        init(controlling: Bool) throws {
            dir.write("nice_peer.py", Array(Self.script.utf8))
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [dir.file("nice_peer.py"), controlling ? "controlling" : "controlled"]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            let reader = output.fileHandleForReading
            readLines(of: reader) { [weak self] line in self?.lines.withLock { $0.append(line) } }
            try process.run()
        }

        func send(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

        func has(_ line: String) -> Bool { lines.withLock { $0.contains(line) } }
        func lines(starting prefix: String) -> [String] { lines.withLock { $0.filter { $0.hasPrefix(prefix) } } }

        func stop() {
            send("QUIT")
            let deadline = Date().addingTimeInterval(3)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning { process.terminate() }
            dir.remove()
        }

        static let script = #"""
            # A libnice ICE peer driven over stdin/stdout, for interop tests of our ICE agent.
            import ctypes, sys, threading
            from ctypes import c_void_p, c_uint, c_int, c_char_p, POINTER, CFUNCTYPE, byref

            glib = ctypes.CDLL("libglib-2.0.so.0")
            gobject = ctypes.CDLL("libgobject-2.0.so.0")
            nice = ctypes.CDLL("libnice.so.10")
            for f, res, args in [
                (glib.g_main_loop_new, c_void_p, [c_void_p, c_int]), (glib.g_main_loop_run, None, [c_void_p]),
                (glib.g_main_context_default, c_void_p, []), (glib.g_free, None, [c_void_p]),
                (glib.g_slist_append, c_void_p, [c_void_p, c_void_p]),
                (nice.nice_agent_new, c_void_p, [c_void_p, c_int]), (nice.nice_address_new, c_void_p, []),
                (nice.nice_address_set_from_string, c_int, [c_void_p, c_char_p]),
                (nice.nice_agent_add_local_address, c_int, [c_void_p, c_void_p]),
                (nice.nice_agent_add_stream, c_uint, [c_void_p, c_uint]),
                (nice.nice_agent_gather_candidates, c_int, [c_void_p, c_uint]),
                (nice.nice_agent_get_local_credentials, c_int, [c_void_p, c_uint, POINTER(c_void_p), POINTER(c_void_p)]),
                (nice.nice_agent_get_local_candidates, c_void_p, [c_void_p, c_uint, c_uint]),
                (nice.nice_agent_generate_local_candidate_sdp, c_void_p, [c_void_p, c_void_p]),
                (nice.nice_agent_set_remote_credentials, c_int, [c_void_p, c_uint, c_char_p, c_char_p]),
                (nice.nice_agent_parse_remote_candidate_sdp, c_void_p, [c_void_p, c_uint, c_char_p]),
                (nice.nice_agent_set_remote_candidates, c_int, [c_void_p, c_uint, c_uint, c_void_p]),
                (nice.nice_agent_peer_candidate_gathering_done, c_int, [c_void_p, c_uint]),
                (nice.nice_agent_send, c_int, [c_void_p, c_uint, c_uint, c_uint, c_void_p]),
                (nice.nice_agent_attach_recv, c_int, [c_void_p, c_uint, c_uint, c_void_p, c_void_p, c_void_p]),
                (gobject.g_signal_connect_data, ctypes.c_ulong, [c_void_p, c_char_p, c_void_p, c_void_p, c_void_p, c_int]),
            ]:
                f.restype = res
                f.argtypes = args

            class GSList(ctypes.Structure):
                _fields_ = [("data", c_void_p), ("next", c_void_p)]

            def say(line):
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

            controlling = sys.argv[1] == "controlling"
            ctx = glib.g_main_context_default()
            loop = glib.g_main_loop_new(ctx, 0)
            agent = nice.nice_agent_new(ctx, 0)  # NICE_COMPATIBILITY_RFC5245
            gobject.g_object_set(c_void_p(agent), b"controlling-mode", c_int(1 if controlling else 0), None)
            gobject.g_object_set(c_void_p(agent), b"ice-tcp", c_int(0), None)
            gobject.g_object_set(c_void_p(agent), b"upnp", c_int(0), None)
            addr = nice.nice_address_new()
            nice.nice_address_set_from_string(addr, b"127.0.0.1")
            nice.nice_agent_add_local_address(agent, addr)
            stream = nice.nice_agent_add_stream(agent, 1)

            STATE_CB = CFUNCTYPE(None, c_void_p, c_uint, c_uint, c_uint, c_void_p)
            DONE_CB = CFUNCTYPE(None, c_void_p, c_uint, c_void_p)
            RECV_CB = CFUNCTYPE(None, c_void_p, c_uint, c_uint, c_uint, c_void_p, c_void_p)

            def on_state(a, s, c, state, data):
                say("STATE %d" % state)  # NiceComponentState: 3 connected, 4 ready, 5 failed

            def on_done(a, s, data):
                u, p = c_void_p(), c_void_p()
                nice.nice_agent_get_local_credentials(agent, stream, byref(u), byref(p))
                say("CRED %s %s" % (ctypes.string_at(u).decode(), ctypes.string_at(p).decode()))
                node = nice.nice_agent_get_local_candidates(agent, stream, 1)
                while node:
                    n = GSList.from_address(node)
                    sdp = nice.nice_agent_generate_local_candidate_sdp(agent, n.data)
                    say("CAND " + ctypes.string_at(sdp).decode())
                    node = n.next
                say("GATHERED")

            def on_recv(a, s, c, length, buf, data):
                payload = ctypes.string_at(buf, length)
                say("RECV %d" % length)
                nice.nice_agent_send(agent, stream, 1, length, ctypes.c_char_p(b"\x80\xee" + payload[2:]))

            state_cb, done_cb, recv_cb = STATE_CB(on_state), DONE_CB(on_done), RECV_CB(on_recv)
            gobject.g_signal_connect_data(agent, b"component-state-changed", ctypes.cast(state_cb, c_void_p), None, None, 0)
            gobject.g_signal_connect_data(agent, b"candidate-gathering-done", ctypes.cast(done_cb, c_void_p), None, None, 0)
            nice.nice_agent_attach_recv(agent, stream, 1, ctx, ctypes.cast(recv_cb, c_void_p), None)
            nice.nice_agent_gather_candidates(agent, stream)

            def read_stdin():
                cands = None
                for line in sys.stdin:
                    line = line.strip()
                    if line.startswith("CRED "):
                        _, u, p = line.split(" ")
                        nice.nice_agent_set_remote_credentials(agent, stream, u.encode(), p.encode())
                    elif line.startswith("CAND "):
                        c = nice.nice_agent_parse_remote_candidate_sdp(agent, stream, line[5:].encode())
                        if c:
                            cands = glib.g_slist_append(cands, c)
                        else:
                            say("BADCAND " + line[5:])
                    elif line == "END":
                        say("SET %d" % nice.nice_agent_set_remote_candidates(agent, stream, 1, cands))
                        nice.nice_agent_peer_candidate_gathering_done(agent, stream)
                    elif line == "QUIT":
                        break
                import os
                os._exit(0)

            threading.Thread(target=read_stdin, daemon=True).start()
            glib.g_main_loop_run(loop)
            """#
    }

    @Test(arguments: [true, false])
    func connectsWithLibnice(libniceControlling: Bool) throws {
        func wait(_ seconds: Double, _ condition: () -> Bool) -> Bool { pollUntil(seconds, condition) }
        let nice = try NicePeer(controlling: libniceControlling)
        defer { nice.stop() }
        #expect(wait(8) { nice.has("GATHERED") }, "libnice did not gather: \(nice.lines.withLock { $0 })")
        let credentials = try #require(nice.lines(starting: "CRED ").first).split(separator: " ").map(String.init)
        try #require(credentials.count == 3)

        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let agent = ICEAgent(socket: socket, configuration: ICEAgentConfiguration(controlling: !libniceControlling))
        defer { agent.stopReading(); agent.close() }
        let echoes = Atomic<Int>(0)
        let gathered = Atomic<Bool>(false)
        agent.onGatheringComplete = { gathered.store(true, ordering: .relaxed) }
        agent.startReading { bytes, _ in
            if bytes.count > 2 && bytes[0] == 0x80 && bytes[1] == 0xEE { echoes.add(1, ordering: .relaxed) }
        }
        agent.setRemoteCredentials(ufrag: credentials[1], password: credentials[2])
        let theirs = nice.lines(starting: "CAND ").compactMap { ICECandidate(sdpValue: String($0.dropFirst("CAND a=".count))) }
        #expect(!theirs.isEmpty)
        for c in theirs { agent.addRemoteCandidate(c) }
        agent.start()
        #expect(wait(2) { gathered.load(ordering: .relaxed) })
        nice.send("CRED \(agent.localUfrag) \(agent.localPassword)")
        for c in agent.localCandidates { nice.send("CAND a=candidate:\(c.sdpValue)") }
        nice.send("END")

        #expect(
            wait(5) { agent.selectedPair != nil && nice.has("STATE 4") },
            "ours: \(agent.pairSnapshots) libnice: \(nice.lines.withLock { $0 })")
        #expect(!nice.has("STATE 5"), "libnice failed")
        #expect(agent.selectedPair?.remote.address == theirs.first?.address)
        #expect(agent.isControlling == !libniceControlling)

        let payload: [UInt8] = [0x80, 0xA1] + [UInt8](repeating: 0x5A, count: 100)
        #expect(
            wait(3) {
                payload.withUnsafeBytes { _ = agent.path.send($0, on: socket) }
                return echoes.load(ordering: .relaxed) >= 3
            }, "libnice: \(nice.lines.withLock { $0 })")
        #expect(nice.lines(starting: "RECV 102").count >= 3)
        let s = agent.statistics
        #expect(s.checksAnswered > 0 && s.responsesReceived > 0)
        #expect(s.droppedRequests == 0 && s.droppedResponses == 0 && s.roleSwitches == 0)
    }
}
