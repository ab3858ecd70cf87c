import Glibc
import MediaBase
import MediaTransport
import MediaWire
import Synchronization

/// The sender's RTCP on its own thread: reads the receiver's SRTCP from the send socket (batched
/// `recvmmsg`), unprotects it (failures counted and dropped) and hands it to an `RTCPSenderSession`
/// that drives the send streams (NACK retransmission, PLI/FIR keyframes, bandwidth estimate), and
/// sends sender reports (RFC 3550 §6.4.1) plus SDES CNAME on a regular interval.
///
/// Thread rule: `start`/`stop` from one controlling thread; `counters` and `remoteInbound` from any
/// thread. Cost: one thread; parsing RTCP allocates small arrays (a few per second).
/// Sendable: `thread` is touched only by `start`/`stop` (one controlling thread) and deinit; `worker` is a `let`
/// whose counters are published through a Mutex.
public final class RTCPSenderEndpoint: @unchecked Sendable {
    /// Settings of the endpoint.
    public struct Configuration: Sendable {
        /// The receiver's key (its SRTCP); nil: plain RTCP.
        public var remoteKey: SRTPKeyMaterial?
        /// Our key for the sender reports; nil: plain RTCP.
        public var localKey: SRTPKeyMaterial?
        /// Where sender reports go; nil: to where the receiver's RTCP comes from (none before it).
        public var destination: SocketAddress?
        /// Mean sender report interval in milliseconds; each interval is drawn from 0.5...1.5 times
        /// it (RFC 3550 §6.3.1).
        public var reportIntervalMilliseconds: Double = 500
        /// Bandwidth estimate: start, floor and ceiling in bits per second.
        public var startBitrate = 1_000_000, minimumBitrate = 50_000, maximumBitrate = 5_000_000
        /// The transport-wide sequence numbers the send streams stamp (their
        /// `transportSequence`): transport-cc feedback is matched to its send log and drives the
        /// delay-based estimate. nil: transport feedback is ignored (REMB and loss only).
        public var transportSequenceNumbers: TransportSequenceNumbers?
        /// Whether the estimate probes the path above itself (`ProbeController`; takes effect
        /// with `transportSequenceNumbers` and a video stream that is paced and has RTX).
        public var probes = true
        /// SSRC of our RTCP packets' SDES (the first stream's by default).
        public var cname = "revue-sender"

        /// Settings with the two keys.
        public init(remoteKey: SRTPKeyMaterial?, localKey: SRTPKeyMaterial?) {
            self.remoteKey = remoteKey
            self.localKey = localKey
        }
    }

    /// What the endpoint saw: the session's counters plus its own.
    public struct Statistics: Sendable, Equatable {
        /// The RTCP session's counters (reports, NACKs, keyframe requests).
        public var session = RTCPSenderSession.Counters()
        /// RTCP compound packets received and accepted (after SRTCP authentication).
        public var rtcpReceived = 0
        /// Datagrams dropped because SRTCP authentication or decryption failed.
        public var authFailures = 0
        /// Datagrams dropped as not RTCP, or truncated.
        public var otherDropped = 0
        /// Sender reports sent.
        public var senderReportsSent = 0
        /// Target send bitrate from the bandwidth estimator, bits per second.
        public var targetBitrate = 0
        /// The delay-based estimate, bits per second; nil before transport feedback.
        public var delayBasedBitrate: Int? = nil
        /// Bitrate the receiver acknowledged through transport feedback, bits per second.
        public var acknowledgedBitrate = 0
        /// The delay-based detector's last output (normal, overusing or underusing).
        public var delayUsage = DelayBasedBandwidthEstimator.Usage.normal
    }

    private let worker: Worker
    private var thread: TransportThread?

    /// Prepares the endpoint on `socket` (the send pipeline's socket) for `targets`.
    public init(socket: UDPSocket, configuration: Configuration, targets: [any RTPSendFeedbackTarget]) throws(SRTPError) {
        let inbound = try configuration.remoteKey.map { k throws(SRTPError) in try SRTPContext(material: k, direction: .inbound) }
        let outbound = try configuration.localKey.map { k throws(SRTPError) in try SRTPContext(material: k, direction: .outbound)
        }
        let session = RTCPSenderSession(
            targets: targets, startBitrate: configuration.startBitrate,
            minimumBitrate: configuration.minimumBitrate, maximumBitrate: configuration.maximumBitrate)
        session.transportSequenceNumbers = configuration.transportSequenceNumbers
        if !configuration.probes { session.probeController = nil }
        worker = Worker(socket: socket, configuration: configuration, session: session, inbound: inbound, outbound: outbound)
    }

    deinit { stop() }

    /// Starts the thread. Calling it twice traps.
    public func start() {
        precondition(thread == nil, "RTCPSenderEndpoint.start() called twice")
        worker.stopping.store(false, ordering: .releasing)
        thread = TransportThread(name: "RTCPSenderEndpoint") { [worker] in worker.run() }
    }

    /// Stops and joins the thread. Idempotent.
    public func stop() {
        worker.stopping.store(true, ordering: .releasing)
        thread?.join()
        thread = nil
    }

    /// Runs the endpoint from its caller on `clock` (a simulated one in tests) instead of its
    /// thread: nothing reads the socket; the receiver's datagrams come in through
    /// `receive(_:from:at:)`, sender reports go out from `runDriven(now:)` (the thread's turn,
    /// every 20 ms at most), protected as on the wire, to `output` with their destination (the
    /// bytes are lent for the call). Report intervals are drawn from `reportSeed`, so a run
    /// repeats exactly; NTP times are `clock`'s. Calling it after `start`, or twice, traps.
    /// Thread rule: the one driving thread, for this and every later call. Cost: none.
    package func startDriven(
        clock: EngineClock, reportSeed: UInt64, output: @escaping (UnsafeRawBufferPointer, SocketAddress) -> Void
    ) {
        precondition(thread == nil && worker.output == nil, "RTCPSenderEndpoint.startDriven() after a start")
        worker.clock = clock
        worker.output = output
        worker.reportSchedule = RTCPReportSchedule(
            intervalMilliseconds: worker.configuration.reportIntervalMilliseconds, seed: reportSeed)
    }

    /// Handles one datagram from the receiver that arrived from `source` at `arrival`, as the
    /// thread handles each one it reads (unprotected in place: the caller's buffer changes).
    /// Thread rule: the driving thread (`startDriven`). Cost: as a datagram off the socket.
    package func receive(_ bytes: UnsafeMutableRawBufferPointer, from source: SocketAddress?, at arrival: MonotonicTime) {
        precondition(worker.output != nil, "RTCPSenderEndpoint.receive(_:from:at:) before startDriven")
        worker.handle(UDPDatagram(bytes: UnsafeRawBufferPointer(bytes), source: source, receivedAt: arrival, isTruncated: false))
    }

    /// What the thread does after each wait, at `now`: sends the sender reports that are due and
    /// publishes `statistics` and `remoteInbound`. Call it every 20 ms and after each received
    /// datagram, as the thread runs. Thread rule: the driving thread. Cost: one turn of the thread.
    package func runDriven(now: MonotonicTime) {
        precondition(worker.output != nil, "RTCPSenderEndpoint.runDriven(now:) before startDriven")
        worker.turn(now: now)
    }

    /// Counters (refreshed every 20 ms).
    public var statistics: Statistics { worker.published.withLock { $0.0 } }
    /// W3C remote-inbound-rtp per SSRC (refreshed every 20 ms).
    public var remoteInbound: [UInt32: RemoteInboundRTPStreamStats] { worker.published.withLock { $0.1 } }

    /// Sendable: the `var`s, batch, buffer and session are used only on the endpoint's thread; other threads touch
    /// only `stopping` (atomic) and `published` (Mutex).
    private final class Worker: @unchecked Sendable {
        let socket: UDPSocket
        let configuration: Configuration
        let session: RTCPSenderSession
        let inbound: SRTPContext?
        let outbound: SRTPContext?
        let stopping = Atomic<Bool>(false)
        let published = Mutex((Statistics(), [UInt32: RemoteInboundRTPStreamStats]()))
        let batch = UDPReceiveBatch(capacity: 16, bufferSize: 2048)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        var stats = Statistics()
        var remote: SocketAddress?
        var reportSchedule: RTCPReportSchedule
        /// The clock reports and arrivals are stamped with, and where reports go instead of the
        /// socket when driven (`startDriven`).
        var clock = EngineClock.monotonic
        var output: ((UnsafeRawBufferPointer, SocketAddress) -> Void)?

        init(
            socket: UDPSocket, configuration: Configuration, session: RTCPSenderSession, inbound: SRTPContext?,
            outbound: SRTPContext?
        ) {
            self.socket = socket
            self.configuration = configuration
            self.session = session
            self.inbound = inbound
            self.outbound = outbound
            remote = configuration.destination
            reportSchedule = RTCPReportSchedule(intervalMilliseconds: configuration.reportIntervalMilliseconds)
        }

        deinit { buffer.deallocate() }

        func run() {
            while !stopping.load(ordering: .acquiring) {
                if (try? socket.waitUntilReadable(timeoutMilliseconds: 20)) == true,
                    let n = try? batch.receive(from: socket, wait: false)
                {
                    for i in 0..<n { handle(batch[i]) }
                }
                turn(now: clock.now)
            }
        }

        /// Sends the reports that are due at `now` and publishes the counters.
        func turn(now: MonotonicTime) {
            if remote != nil && reportSchedule.isDue(now: now) {
                sendReports(now: now)
            }
            stats.session = session.counters
            stats.targetBitrate = session.estimator.targetBitrate
            stats.delayBasedBitrate = session.estimator.delayBasedBitrate
            stats.acknowledgedBitrate = Int(session.estimator.delayBased.acknowledgedBitrate)
            stats.delayUsage = session.estimator.delayBased.usage
            let s = stats, r = session.remoteInbound
            published.withLock { $0 = (s, r) }
        }

        func handle(_ d: UDPDatagram) {
            guard !d.isTruncated, RTPDemultiplexer.classify(d.bytes.bytes) == .rtcp else { stats.otherDropped += 1; return }
            var bytes = d.bytes
            if let inbound {
                let b = UnsafeMutableRawBufferPointer(mutating: d.bytes)
                var span = b.mutableBytes
                guard let n = try? inbound.unprotectRTCP(&span, length: b.count) else { stats.authFailures += 1; return }
                bytes = UnsafeRawBufferPointer(rebasing: d.bytes[0..<n])
            }
            stats.rtcpReceived += 1
            if configuration.destination == nil { remote = d.source }
            session.handle(bytes, now: d.receivedAt, arrival: clock.ntpNow)
        }

        private func sendReports(now: MonotonicTime) {
            guard let remote else { return }
            let reports = session.senderReports(ntpTime: clock.ntpNow, now: now)
            guard
                let size = RTCPSenderSession.writeSenderReportCompound(
                    reports, cname: configuration.cname, protectedBy: outbound, into: buffer)
            else { return }
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<size])
            if let output {
                output(bytes, remote)
                stats.senderReportsSent += 1
            } else if (try? socket.send(bytes, to: remote)) != nil {
                stats.senderReportsSent += 1
            }
        }
    }
}
