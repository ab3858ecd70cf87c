internal import CMediaShims
import MediaBase

/// The DTLS-SRTP handshake of one WebRTC media path (RFC 5763, RFC 5764): agrees an SRTP profile
/// with the peer over DTLS 1.2, checks the peer's certificate against the fingerprint from the
/// remote description, and exports the SRTP master keys of both directions.
///
/// OpenSSL runs the protocol on memory: `handle(datagram:now:)` passes in each received DTLS
/// datagram (first byte 20-63, RFC 7983), and every datagram to send goes to `onDatagram`, so the
/// transport runs over whatever carries datagrams (the ICE agent's selected pair, a test link).
/// Each endpoint makes its own ECDSA P-256 key and self-signed certificate; `fingerprint` is what
/// the local description advertises. The `.active` side (`a=setup:active`) is the DTLS client and
/// sends the first flight from `start(now:)`; the `.passive` side answers.
///
/// Flights are retransmitted when the caller calls `handleTimeout(now:)` at `nextDeadline(now:)`
/// (first after `initialRetransmissionTimeout`, doubling up to `maxRetransmissionTimeout`), and the
/// whole handshake fails with `.handshakeTimeout` if it has not succeeded `handshakeTimeout` after
/// `start`. On success `state` becomes `.connected` and `takeKeys()` hands out the SRTP key
/// material once. Malformed datagrams, records that cannot be right at that point (which would
/// make OpenSSL end the handshake) and datagrams after failure are dropped and counted in
/// `statistics`; nothing a peer sends can trap. An alert in the clear, which anyone who knows the
/// addresses can forge (directly or through a TURN relay), never ends the association at once:
/// during the handshake a fatal one is held for `plaintextAlertGrace` and forgotten if the
/// handshake moves on; after it, it is dropped. Pass it only datagrams from the ICE-verified
/// remote address: a well-formed hostile handshake message still ends the handshake.
///
/// Thread rule: single owner. One thread (or serial queue) makes every call, and `onDatagram` and
/// `onStateChange` run on that thread, inside the call that caused them. Cost: `init` generates a
/// key pair and signs a certificate (about a millisecond); a handshake costs two ECDHE and two
/// ECDSA operations per side; each later call handles one datagram without heap allocation beyond
/// what OpenSSL does.
package final class DTLSTransport {
    /// Which side starts the handshake, from the SDP `a=setup` attribute (RFC 5763 section 5).
    /// Thread rule: a value type. Cost: none.
    package enum Role: Sendable, Hashable {
        /// `a=setup:active`: the DTLS client, which sends the first flight.
        case active
        /// `a=setup:passive`: the DTLS server, which answers.
        case passive
    }

    /// Settings fixed at creation. Thread rule: a value type. Cost: none.
    package struct Configuration: Sendable {
        /// The DTLS role.
        package var role: Role
        /// The largest datagram the transport writes; handshake messages are fragmented to fit.
        /// 1200 leaves room for IPv6, UDP and a TURN ChannelData header on a 1280-byte path.
        package var mtu: Int = 1200
        /// The overall bound on the handshake, from `start` until `.connected`, in seconds.
        package var handshakeTimeout: Double = 10
        /// The first retransmission timeout of a flight, in seconds. RFC 6347 suggests 1 s for the
        /// open Internet; ICE has just measured the path, so WebRTC stacks start lower.
        package var initialRetransmissionTimeout: Double = 0.1
        /// The retransmission timeout stops doubling here, in seconds.
        package var maxRetransmissionTimeout: Double = 3
        /// How long a fatal alert in the clear (epoch 0, so anyone who knows the addresses can
        /// forge one) is held during the handshake before it ends it, in seconds: a datagram that
        /// moves the handshake on in the meantime shows the peer is still in it, and the alert is
        /// forgotten. A peer that really gave up sends nothing more, and the handshake fails with
        /// its alert once this has passed.
        package var plaintextAlertGrace: Double = 2
        /// How long the generated certificate is valid, in days (it is used once per session).
        package var certificateValidityDays: Int = 30
        /// The key and certificate to present; nil: a fresh pair for this endpoint.
        package var identity: DTLSIdentity? = nil
        /// The SRTP protection profiles offered (use_srtp, RFC 5764 section 4.1.1), most preferred
        /// first: AEAD_AES_128_GCM (RFC 7714), then AES_CM_128_HMAC_SHA1_80, which every WebRTC
        /// stack supports. The server picks; the keys come out for its choice.
        package var srtpProfiles: [SRTPSuite] = [.aeadAES128GCM, .aesCM128HMACSHA1_80]

        /// A configuration for `role` with the defaults above.
        package init(role: Role) { self.role = role }
    }

    /// Where the handshake stands. Thread rule: a value type. Cost: none.
    package enum State: Sendable, Hashable {
        /// Created; `start` or the peer's first datagram has not come yet.
        case new
        /// The handshake is running.
        case connecting
        /// The handshake finished but no remote fingerprint is set yet: keys are held back until
        /// `setRemoteFingerprint` confirms the peer's certificate.
        case awaitingFingerprint
        /// The peer is verified and the SRTP keys are exported.
        case connected
        /// The handshake failed; the transport is unusable.
        case failed(DTLSError)
        /// The peer or `close()` ended the association.
        case closed
    }

    /// Counters of what the transport saw and did. Thread rule: a value type (a copy). Cost: none.
    package struct Statistics: Sendable, Hashable {
        /// Datagrams handed to `handle(datagram:now:)`.
        package var datagramsReceived = 0
        /// Datagrams passed to `onDatagram`.
        package var datagramsSent = 0
        /// Datagrams whose first byte is not a DTLS content type (outside 20-63), dropped.
        package var notDTLSDropped = 0
        /// Datagrams that do not split into whole DTLS 1.x records (short header, unknown content
        /// type or version, a length past the end), or whose plaintext records make no sense (a
        /// ChangeCipherSpec other than the byte 1, an alert of the wrong size, handshake fragments
        /// of unknown types or that do not fit their message), dropped before OpenSSL sees them.
        package var malformedDropped = 0
        /// Well-formed datagrams that cannot be right at this point: application data or a
        /// heartbeat in the clear, or a first datagram that does not belong to the peer's first
        /// flight (a ClientHello for the passive side, the server's flight for the active side).
        /// Dropped before OpenSSL sees them, because OpenSSL ends a handshake on any of them.
        package var unexpectedDropped = 0
        /// Datagrams that came after the transport failed or closed, dropped.
        package var droppedAfterEnd = 0
        /// Flights resent after their retransmission timer expired.
        package var retransmissions = 0
        /// Alerts in the clear (epoch 0) held during the handshake instead of ending it, and
        /// those dropped after it (where nothing unauthenticated may end the association).
        package var plaintextAlertsHeld = 0
        package var plaintextAlertsDropped = 0
        /// Application data records received and passed to `onApplicationData`.
        package var applicationDataReceived = 0
        /// Application data records dropped because 64 were already waiting (a peer that sends
        /// faster than the owner drains; SCTP retransmits them).
        package var applicationDataDropped = 0
        /// Application data records sent with `sendApplicationData`, and those refused.
        package var applicationDataSent = 0
        package var applicationDataRefused = 0
    }

    /// The SRTP master keys of both directions, for the negotiated profile. Thread rule: an
    /// immutable value, freely shared (the key bytes are zeroed when the last copy goes away).
    package struct SRTPKeys: Sendable {
        /// The negotiated protection profile.
        package let suite: SRTPSuite
        /// The key and salt this side protects with (the client write key on the active side).
        package let send: SRTPKeyMaterial
        /// The key and salt this side verifies the peer's packets with.
        package let receive: SRTPKeyMaterial

        /// An outbound `SRTPContext` for `send` and an inbound one for `receive`.
        /// Cost: two libsrtp sessions (microseconds).
        package func makeContexts(options: SRTPContext.Options = SRTPContext.Options()) throws(SRTPError)
            -> (outbound: SRTPContext, inbound: SRTPContext)
        {
            (
                try SRTPContext(material: send, direction: .outbound, options: options),
                try SRTPContext(material: receive, direction: .inbound, options: options)
            )
        }
    }

    /// Called with each datagram to send, valid only during the call. Set before `start`.
    package var onDatagram: ((UnsafeRawBufferPointer) -> Void)?
    /// Called when `state` changes.
    package var onStateChange: ((State) -> Void)?
    /// Called with each application data record the peer sent (the SCTP packets of data
    /// channels, RFC 8261), valid only during the call, in order, and only once the peer is
    /// verified (`.connected`): records that arrive before are held (at most 64) until then.
    package var onApplicationData: ((UnsafeRawBufferPointer) -> Void)?

    /// The configuration the transport was made with.
    package private(set) var configuration: Configuration
    /// The SHA-256 fingerprint of this endpoint's certificate, for `a=fingerprint`.
    package let fingerprint: DTLSFingerprint
    /// The fingerprint the peer's certificate must have, once known.
    package private(set) var remoteFingerprint: DTLSFingerprint?
    /// The fingerprint of the certificate the peer presented, once it has.
    package private(set) var peerFingerprint: DTLSFingerprint?
    /// The handshake state.
    package private(set) var state: State = .new
    /// What the transport has counted so far.
    package private(set) var statistics = Statistics()
    /// The negotiated profile, once connected.
    package private(set) var suite: SRTPSuite?

    private let endpoint: OpaquePointer
    private var keys: SRTPKeys?
    /// When the handshake fails if it has not finished (set by `start`).
    private var deadline: MonotonicTime?
    /// Whether a datagram of the peer's first flight has been accepted.
    private var heardFromPeer = false
    /// A fatal alert in the clear received during the handshake: its code, and when it ends the
    /// handshake unless the handshake moves on first (`plaintextAlertGrace`).
    private var heldAlert: (code: UInt8, failsAt: MonotonicTime)?
    private var sendBuffer: UnsafeMutableRawBufferPointer
    /// Where a received application data record is copied for `onApplicationData` (16 KiB, made
    /// with the first record).
    private var receiveBuffer: UnsafeMutableRawBufferPointer?

    /// A transport for `configuration.role` with a fresh key and certificate (or
    /// `configuration.identity`'s). Throws
    /// `.protocolError` when OpenSSL cannot make them (out of memory, a broken libssl).
    package init(configuration: Configuration) throws(DTLSError) {
        self.configuration = configuration
        var error = [CChar](repeating: 0, count: 256)
        let ms = { (seconds: Double) in UInt32(max(1, min(seconds * 1000, 600_000))) }
        guard !configuration.srtpProfiles.isEmpty else { throw .protocolError(reason: "no SRTP profile to offer") }
        let profiles = configuration.srtpProfiles.map(Self.profileName).joined(separator: ":")
        guard
            let made = cms_dtls_new_with_identity(
                configuration.role == .active ? 1 : 0,
                Int32(max(256, min(configuration.mtu, 16384))),
                ms(configuration.initialRetransmissionTimeout),
                ms(configuration.maxRetransmissionTimeout),
                Int32(max(1, min(configuration.certificateValidityDays, 3650))),
                configuration.identity?.handle, profiles, &error, error.count)
        else {
            throw .protocolError(
                reason: String(
                    decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) },
                    as: UTF8.self))
        }
        endpoint = made
        var digest = [UInt8](repeating: 0, count: 32)
        _ = cms_dtls_fingerprint(made, &digest)
        fingerprint = DTLSFingerprint(bytes: digest)!
        sendBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(configuration.mtu, 1500) + 512, alignment: 16)
    }

    deinit {
        cms_dtls_free(endpoint)
        sendBuffer.deallocate()
        receiveBuffer?.deallocate()
    }

    /// This endpoint's certificate in PEM form (for peers that take a certificate rather than a
    /// fingerprint, and for tests). Cost: encodes the certificate.
    package var certificatePEM: String {
        var out = [CChar](repeating: 0, count: 4096)
        let n = cms_dtls_certificate_pem(endpoint, &out, out.count)
        return String(decoding: out[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// True when `byte`, the first byte of a datagram, marks a DTLS record (RFC 7983: 20-63).
    package static func isDTLS(firstByte byte: UInt8) -> Bool { (20...63).contains(byte) }

    /// Sets the fingerprint from the remote description. When the handshake has already finished
    /// (`.awaitingFingerprint`), verifies the peer now and either exports the keys or fails with
    /// `.fingerprintMismatch`. Setting another value later has no effect on a finished handshake.
    package func setRemoteFingerprint(_ remote: DTLSFingerprint) {
        guard remoteFingerprint == nil else { return }
        remoteFingerprint = remote
        if state == .awaitingFingerprint {
            verifyAndExport()
            deliverApplicationData()
        }
    }

    /// Changes the role before the handshake starts (a peer connection's offer advertises the
    /// certificate before the answer's `a=setup` picks the roles). Ignored once `start` was called
    /// or a datagram of the peer was accepted. Cost: none.
    package func setRole(_ role: Role) {
        guard state == .new, !heardFromPeer else { return }
        configuration.role = role
        cms_dtls_set_client(endpoint, role == .active ? 1 : 0)
    }

    /// Starts the handshake at `now`: the active side sends its first flight, both sides start the
    /// overall timeout. Calling it again does nothing.
    package func start(now: MonotonicTime) {
        guard state == .new else { return }
        deadline = now + .nanoseconds(Int64(max(0, configuration.handshakeTimeout) * 1e9))
        setState(.connecting)
        if configuration.role == .active { process(cms_dtls_handshake(endpoint)) }
    }

    /// Handles one received datagram at `now`. A passive transport that was not started starts
    /// here. Datagrams the screen refuses (not DTLS, malformed, unexpected at this point; see
    /// `Statistics`) are dropped and counted without reaching OpenSSL.
    package func handle(datagram: UnsafeRawBufferPointer, now: MonotonicTime) {
        statistics.datagramsReceived += 1
        switch state {
        case .failed, .closed:
            statistics.droppedAfterEnd += 1
            return
        default: break
        }
        guard let first = datagram.first, Self.isDTLS(firstByte: first) else {
            statistics.notDTLSDropped += 1
            return
        }
        switch Self.screen(datagram, firstFlight: heardFromPeer ? nil : configuration.role) {
        case .malformed:
            statistics.malformedDropped += 1
            return
        case .unexpected:
            statistics.unexpectedDropped += 1
            return
        case .accept:
            break
        }
        if let alert = Self.plaintextAlert(datagram) {
            // Unauthenticated: it may come from anyone who knows the addresses (or through the
            // relay), so it never ends an association by itself. During the handshake a fatal
            // one is held (`plaintextAlertGrace`); a warning, or one after the handshake, goes.
            switch state {
            case .new, .connecting:
                statistics.plaintextAlertsHeld += 1
                if alert.fatal && heldAlert == nil {
                    heldAlert = (alert.code, now + .nanoseconds(Int64(max(0, configuration.plaintextAlertGrace) * 1e9)))
                }
            default:
                statistics.plaintextAlertsDropped += 1
            }
            return
        }
        heardFromPeer = true
        if state == .new { start(now: now) }
        heldAlert = nil  // the peer is still in the handshake
        process(cms_dtls_feed(endpoint, datagram.baseAddress, datagram.count))
        deliverApplicationData()
    }

    /// Sends `bytes` (1 to 16,384) as one application data record (an SCTP packet, RFC 8261):
    /// the datagram goes to `onDatagram` before this returns. Returns false, and counts it in
    /// `applicationDataRefused`, unless `.connected`. Cost: one AEAD seal and one datagram.
    @discardableResult
    package func sendApplicationData(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard state == .connected, cms_dtls_write(endpoint, bytes.baseAddress, bytes.count) == 1 else {
            statistics.applicationDataRefused += 1
            return false
        }
        statistics.applicationDataSent += 1
        flush()
        return true
    }

    /// Hands the waiting application data records to `onApplicationData` once connected.
    private func deliverApplicationData() {
        guard state == .connected else { return }
        statistics.applicationDataDropped = cms_dtls_application_data_dropped(endpoint)
        if receiveBuffer == nil { receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16384, alignment: 16) }
        guard let buffer = receiveBuffer else { return }
        while true {
            let n = cms_dtls_next_application_data(endpoint, buffer.baseAddress, buffer.count)
            guard n > 0 else { return }
            statistics.applicationDataReceived += 1
            onApplicationData?(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            guard state == .connected else { return }
        }
    }

    /// The alert of a datagram that is one plaintext (epoch 0) alert record, else nil.
    private static func plaintextAlert(_ datagram: UnsafeRawBufferPointer) -> (code: UInt8, fatal: Bool)? {
        guard datagram.count == 15, datagram[0] == 21, datagram[3] == 0, datagram[4] == 0 else { return nil }
        return (datagram[14], datagram[13] == 2)
    }

    /// `handle(datagram:now:)` for a byte array.
    package func handle(datagram: [UInt8], now: MonotonicTime) {
        datagram.withUnsafeBytes { handle(datagram: $0, now: now) }
    }

    /// When `handleTimeout` must be called next: the earlier of the flight's retransmission timer
    /// and the handshake deadline. Nil when no timer runs (connected, failed, closed, or not
    /// started).
    package func nextDeadline(now: MonotonicTime) -> MonotonicTime? {
        switch state {
        case .connecting:
            guard var deadline else { return nil }
            if let held = heldAlert { deadline = min(deadline, held.failsAt) }
            let us = cms_dtls_timeout_us(endpoint)
            return us >= 0 ? min(deadline, now + .microseconds(us)) : deadline
        case .awaitingFingerprint:
            return deadline
        default:
            return nil
        }
    }

    /// Resends the outstanding flight if its timer has expired, and fails the handshake with
    /// `.handshakeTimeout` once `now` is past the overall deadline. Cheap when nothing is due.
    package func handleTimeout(now: MonotonicTime) {
        switch state {
        case .connecting, .awaitingFingerprint: break
        default: return
        }
        if let deadline, now >= deadline {
            fail(.handshakeTimeout)
            return
        }
        guard state == .connecting else { return }
        if let held = heldAlert, now >= held.failsAt {
            let name = cms_dtls_alert_name(Int32(held.code)).map { String(cString: $0) } ?? "unknown"
            fail(.alert(code: held.code, description: name))
            return
        }
        switch cms_dtls_handle_timeout(endpoint) {
        case 1:
            flush()
        case -1:
            flush()
            fail(.handshakeTimeout)
        default: break
        }
    }

    /// Hands out the SRTP keys once, after `.connected`; nil before, and on every later call (the
    /// transport keeps no copy, and the exporter output was zeroed when the keys were made).
    package func takeKeys() -> SRTPKeys? {
        defer { keys = nil }
        return keys
    }

    /// Ends the association: sends close_notify when connected, and moves to `.closed`.
    package func close() {
        switch state {
        case .failed, .closed: return
        case .connected, .awaitingFingerprint:
            cms_dtls_close(endpoint)
            flush()
        default: break
        }
        keys = nil
        setState(.closed)
    }

    // MARK: private

    private func process(_ progress: Int32) {
        flush()
        switch progress {
        case Int32(CMS_DTLS_DONE):
            if state == .connecting { handshakeFinished() }
            if cms_dtls_peer_closed(endpoint) != 0 {
                keys = nil
                setState(.closed)
            }
        case Int32(CMS_DTLS_FAILED):
            var fatal: Int32 = 0
            let alert = cms_dtls_peer_alert(endpoint, &fatal)
            if alert >= 0 && fatal != 0 {
                let name = cms_dtls_alert_name(alert).map { String(cString: $0) } ?? "unknown"
                fail(.alert(code: UInt8(truncatingIfNeeded: alert), description: name))
            } else {
                var reason = [CChar](repeating: 0, count: 256)
                let n = cms_dtls_error(endpoint, &reason, reason.count)
                fail(.protocolError(reason: String(decoding: reason[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)))
            }
        default:
            break
        }
    }

    private func handshakeFinished() {
        var digest = [UInt8](repeating: 0, count: 32)
        guard cms_dtls_peer_fingerprint(endpoint, &digest) == 1, let peer = DTLSFingerprint(bytes: digest) else {
            fail(.protocolError(reason: "peer presented no certificate"))
            return
        }
        peerFingerprint = peer
        if remoteFingerprint == nil {
            setState(.awaitingFingerprint)
        } else {
            verifyAndExport()
        }
    }

    /// Compares the peer's certificate with the signalled fingerprint; only on a match are keys
    /// exported (RFC 5763 section 5: before any key is used).
    private func verifyAndExport() {
        guard let remote = remoteFingerprint, let peer = peerFingerprint else { return }
        guard remote == peer else {
            // The handshake itself finished, so the peer holds keys: tell it the association is
            // over (close_notify) rather than leave it sending until ICE consent runs out.
            cms_dtls_close(endpoint)
            flush()
            fail(.fingerprintMismatch)
            return
        }
        let profile = cms_dtls_srtp_profile(endpoint)
        let negotiated: SRTPSuite
        switch profile {
        case Int32(CMS_DTLS_SRTP_AEAD_AES_128_GCM): negotiated = .aeadAES128GCM
        case Int32(CMS_DTLS_SRTP_AES128_CM_SHA1_80): negotiated = .aesCM128HMACSHA1_80
        case Int32(CMS_DTLS_SRTP_AES128_CM_SHA1_32): negotiated = .aesCM128HMACSHA1_32
        case Int32(CMS_DTLS_SRTP_AEAD_AES_256_GCM): negotiated = .aeadAES256GCM
        default:
            fail(.protocolError(reason: "no SRTP protection profile was negotiated (use_srtp profile \(profile))"))
            return
        }
        // RFC 5764 section 4.2: client key, server key, client salt, server salt.
        let k = negotiated.masterKeyLength, s = negotiated.masterSaltLength
        let exported = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * (k + s), alignment: 16)
        defer {
            Sodium.wipe(exported)
            exported.deallocate()
        }
        guard cms_dtls_export_srtp(endpoint, exported.baseAddress!.assumingMemoryBound(to: UInt8.self), exported.count) == 1
        else {
            fail(.protocolError(reason: "SRTP keying material export failed"))
            return
        }
        let all = UnsafeRawBufferPointer(exported)
        let client = SRTPKeyMaterial(
            suite: negotiated, key: UnsafeRawBufferPointer(rebasing: all[0..<k]),
            salt: UnsafeRawBufferPointer(rebasing: all[(2 * k)..<(2 * k + s)]))
        let server = SRTPKeyMaterial(
            suite: negotiated, key: UnsafeRawBufferPointer(rebasing: all[k..<(2 * k)]),
            salt: UnsafeRawBufferPointer(rebasing: all[(2 * k + s)..<(2 * k + 2 * s)]))
        let active = configuration.role == .active
        keys = SRTPKeys(suite: negotiated, send: active ? client : server, receive: active ? server : client)
        suite = negotiated
        setState(.connected)
    }

    /// OpenSSL's use_srtp name of a suite (RFC 5764 section 4.1.2, RFC 7714 section 14.2).
    private static func profileName(_ suite: SRTPSuite) -> String {
        switch suite {
        case .aeadAES128GCM: "SRTP_AEAD_AES_128_GCM"
        case .aeadAES256GCM: "SRTP_AEAD_AES_256_GCM"
        case .aesCM128HMACSHA1_80: "SRTP_AES128_CM_SHA1_80"
        case .aesCM128HMACSHA1_32: "SRTP_AES128_CM_SHA1_32"
        }
    }

    private func fail(_ error: DTLSError) {
        keys = nil
        setState(.failed(error))
    }

    private func setState(_ new: State) {
        guard new != state else { return }
        state = new
        onStateChange?(new)
    }

    /// Passes every queued outgoing datagram to `onDatagram`.
    private func flush() {
        statistics.retransmissions = cms_dtls_retransmissions(endpoint)
        while true {
            let n = cms_dtls_next_datagram(endpoint, sendBuffer.baseAddress, sendBuffer.count)
            if n == 0 { return }
            if n < 0 {
                // Larger than any datagram OpenSSL should write with our MTU; grow and retry.
                let bigger = UnsafeMutableRawBufferPointer.allocate(byteCount: sendBuffer.count * 2, alignment: 16)
                sendBuffer.deallocate()
                sendBuffer = bigger
                if sendBuffer.count > 1 << 20 { return }
                continue
            }
            statistics.datagramsSent += 1
            onDatagram?(UnsafeRawBufferPointer(rebasing: sendBuffer[0..<n]))
        }
    }

    /// What `screen` makes of a datagram.
    enum Screening: Equatable {
        /// Hand it to OpenSSL.
        case accept
        /// Broken framing or nonsense plaintext: count in `malformedDropped`.
        case malformed
        /// Well-formed but impossible here: count in `unexpectedDropped`.
        case unexpected
    }

    /// Handshake message types that may travel in the clear at epoch 0 (RFC 5246 section 7.4,
    /// RFC 6347 section 4.2.1). Finished never does: it follows ChangeCipherSpec.
    private static let plaintextHandshakeTypes: Set<UInt8> = [0, 1, 2, 3, 4, 11, 12, 13, 14, 15, 16]
    /// The messages of the server's first flight (ServerHello, HelloVerifyRequest, Certificate,
    /// ServerKeyExchange, CertificateRequest, ServerHelloDone).
    private static let serverFlightTypes: Set<UInt8> = [2, 3, 11, 12, 13, 14]

    /// Checks `datagram` before OpenSSL sees it, since OpenSSL ends a handshake on any record it
    /// cannot use. The datagram must be a sequence of whole DTLS 1.0/1.2 records (RFC 6347
    /// section 4.1: 13-byte headers, content types 20-24, version FEFF or FEFD, lengths inside the
    /// datagram). Records at epoch 0 are plaintext and checked further: ChangeCipherSpec is the
    /// byte 1, an alert is two bytes of level 1 or 2, a handshake record is whole 12-byte fragment
    /// headers of plaintext types whose fragments fit their message; application data and
    /// heartbeats are refused. Encrypted records (epoch 1 and up) are left to OpenSSL, which drops
    /// those that fail authentication. With `firstFlight` set (nothing accepted yet from the peer),
    /// the datagram must carry a ClientHello (for `.passive`) or a server flight message (for
    /// `.active`), or an alert.
    static func screen(_ datagram: UnsafeRawBufferPointer, firstFlight: Role?) -> Screening {
        var at = 0
        var unexpected = false
        var opensFirstFlight = false
        func uint24(_ b: UnsafeRawBufferPointer, _ i: Int) -> Int { Int(b[i]) << 16 | Int(b[i + 1]) << 8 | Int(b[i + 2]) }
        while at < datagram.count {
            guard datagram.count - at >= 13 else { return .malformed }
            let type = datagram[at]
            guard (20...24).contains(type), datagram[at + 1] == 0xFE,
                datagram[at + 2] == 0xFD || datagram[at + 2] == 0xFF
            else { return .malformed }
            let epoch = Int(datagram[at + 3]) << 8 | Int(datagram[at + 4])
            let length = Int(datagram[at + 11]) << 8 | Int(datagram[at + 12])
            guard length <= 18432, length <= datagram.count - at - 13 else { return .malformed }
            let body = UnsafeRawBufferPointer(rebasing: datagram[(at + 13)..<(at + 13 + length)])
            at += 13 + length
            if type == 24 {  // heartbeat: never negotiated
                unexpected = true
                continue
            }
            guard epoch == 0 else { continue }
            switch type {
            case 20:
                guard length == 1, body[0] == 1 else { return .malformed }
            case 21:
                guard length == 2, body[0] == 1 || body[0] == 2 else { return .malformed }
                // A peer may answer the first flight with an alert (no common cipher...): let it
                // through so the failure is reported as what it is.
                opensFirstFlight = true
            case 22:
                guard length >= 12 else { return .malformed }
                var offset = 0
                while offset < length {
                    guard length - offset >= 12 else { return .malformed }
                    let messageType = body[offset]
                    let messageLength = uint24(body, offset + 1)
                    let fragmentOffset = uint24(body, offset + 6)
                    let fragmentLength = uint24(body, offset + 9)
                    guard Self.plaintextHandshakeTypes.contains(messageType),
                        fragmentOffset + fragmentLength <= messageLength,
                        fragmentLength <= length - offset - 12
                    else { return .malformed }
                    switch firstFlight {
                    case .passive?: if messageType == 1 { opensFirstFlight = true }
                    case .active?: if Self.serverFlightTypes.contains(messageType) { opensFirstFlight = true }
                    case nil: break
                    }
                    offset += 12 + fragmentLength
                }
            default:  // 23: application data before any key
                unexpected = true
            }
        }
        guard at > 0 else { return .malformed }
        if unexpected || (firstFlight != nil && !opensFirstFlight) { return .unexpected }
        return .accept
    }
}
