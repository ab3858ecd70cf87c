internal import CMediaShims
import Synchronization

/// libsrtp's status from its one `srtp_init()` call. A global `let` is initialised lazily, exactly
/// once and thread-safely by the Swift runtime. libsrtp is never shut down: contexts may live until
/// the process exits, and `srtp_shutdown` would pull the crypto kernel from under them.
private let srtpInitStatus: srtp_err_status_t = srtp_init()

/// One SRTP session (RFC 3711): protects outgoing or verifies incoming RTP and RTCP packets in
/// place, with one master key, per-SSRC streams and a replay window. Owns a libsrtp `srtp_t`.
///
/// An `.outbound` context protects packets of any SSRC it has not seen before (libsrtp's
/// `ssrc_any_outbound` template); an `.inbound` one accepts any SSRC (`ssrc_any_inbound`). Give
/// `ssrcs:` instead to accept only those streams, and add or remove streams later with
/// `addStream(ssrc:)` / `removeStream(ssrc:)`. Use one context per direction, as libsrtp requires.
///
/// Packets are processed in the caller's buffer: `protect` appends the tag after the packet (for
/// RTCP also the E flag and SRTCP index, and the MKI when the key material has one, RFC 3711
/// section 3.1), so the buffer needs `maxProtectedSize(for:)` bytes; `unprotect` shrinks the
/// packet. Buffers should start 4-byte aligned, as libsrtp reads the header in 32-bit words.
///
/// Thread rule: safe to use from several threads at once. libsrtp contexts are not thread-safe, so
/// every call runs under an internal `Mutex`; uncontended (one sender thread, one receiver thread
/// per context, the engine's design) it costs one atomic exchange. Cost: `init` allocates libsrtp's
/// session and derives keys (microseconds); `protect`/`unprotect` do not allocate, except the first
/// packet of a new SSRC on a wildcard context, which clones a stream.
public final class SRTPContext: Sendable {
    /// Which way packets flow through the context.
    public enum Direction: Sendable {
        /// Sender: `protect` and `protectRTCP` (libsrtp `ssrc_any_outbound` wildcard).
        case outbound
        /// Receiver: `unprotect` and `unprotectRTCP` (libsrtp `ssrc_any_inbound` wildcard).
        case inbound
    }

    /// Replay and retransmission settings shared by every stream of the context.
    public struct Options: Sendable {
        /// Replay window in packets (RFC 3711 section 3.3.2), 64 to 32767; libsrtp rejects other
        /// values with `.badParam`. Larger windows tolerate more reordering. Default 1024, as
        /// libwebrtc and Firefox use.
        public var replayWindowSize: Int = 1024
        /// Lets a sender protect the same sequence number again (RTP retransmission of an identical
        /// packet, libsrtp `allow_repeat_tx`). Retransmitting different payload under the same
        /// index would reuse keystream: only enable it for byte-identical resends. Off by default
        /// (libwebrtc turns it on); a NACK responder can instead resend the protected bytes it kept.
        public var allowRepeatTransmission: Bool = false

        /// Default options.
        public init() {}
    }

    /// The suite of every stream in this context.
    public let suite: SRTPSuite
    /// The direction the context was created for.
    public let direction: Direction
    /// The options the context was created with.
    public let options: Options
    /// Bytes of MKI carried in every packet (0 when the key material has no MKI).
    public let mkiLength: Int
    /// libsrtp's `use_mki` flag for the `*_mki` calls: 1 when packets carry an MKI.
    private let useMKI: UInt32

    /// Serialises every libsrtp call on `session`.
    private let lock = Mutex(())
    /// The libsrtp session; only touched while holding `lock` (and in deinit).
    // Safe: the pointer is set once in init; libsrtp is called on it only inside `lock` (and in deinit).
    nonisolated(unsafe) private let session: srtp_t
    /// A private copy of key||salt, kept to add streams later; zeroed on deinit.
    private let key: SRTPKeyMaterial

    /// Creates a context for `material`'s suite and key. With `ssrcs` nil the context takes any SSRC
    /// in `direction`; otherwise only the listed SSRCs (more can be added with `addStream`).
    /// When `material` has an MKI, every packet carries it (RFC 3711 section 3.1) and incoming
    /// packets must carry the same one (`.badMKI` otherwise). An MKI with `AES_CM_128_HMAC_SHA1_32`
    /// throws `.badParam`: libsrtp 2.5 looks for the MKI using the RTP tag length, so SRTCP (which
    /// keeps the 80-bit tag with that suite) could never be verified.
    /// Throws `.badParam` for an unusable option (such as a replay window outside 64-32767),
    /// `.initFail`/`.allocFail` when libsrtp cannot start.
    public init(
        material: SRTPKeyMaterial, direction: Direction, ssrcs: [UInt32]? = nil,
        options: Options = Options()
    ) throws(SRTPError) {
        try srtpInitStatus.check()
        if material.mki != nil && material.suite == .aesCM128HMACSHA1_32 { throw .badParam }
        suite = material.suite
        mkiLength = material.mki?.length ?? 0
        useMKI = material.mki == nil ? 0 : 1
        self.direction = direction
        self.options = options
        key = material

        var created: srtp_t? = nil
        var status = srtp_err_status_ok
        if let ssrcs {
            status = srtp_create(&created, nil)
            if status == srtp_err_status_ok, let created {
                for ssrc in ssrcs {
                    status = Self.add(
                        to: created, material: material, type: ssrc_specific,
                        ssrc: ssrc, options: options)
                    if status != srtp_err_status_ok { break }
                }
            }
        } else {
            status = Self.withPolicy(
                material: material,
                type: direction == .outbound ? ssrc_any_outbound : ssrc_any_inbound,
                ssrc: 0, options: options
            ) { policy in srtp_create(&created, &policy) }
        }
        if status != srtp_err_status_ok {
            if let created { srtp_dealloc(created) }
            throw SRTPError(status)
        }
        guard let created else { throw .allocFail }
        session = created
    }

    deinit {
        srtp_dealloc(session)
    }

    private static func withPolicy(
        material: SRTPKeyMaterial, type: srtp_ssrc_type_t, ssrc: UInt32,
        options: Options,
        _ body: (inout srtp_policy_t) -> srtp_err_status_t
    ) -> srtp_err_status_t {
        guard options.replayWindowSize > 0, options.replayWindowSize < 0x8000 else {
            return srtp_err_status_bad_param
        }
        return material.withKeyAndSalt { keyAndSalt in
            var policy = srtp_policy_t()
            material.suite.setRTPPolicy(&policy.rtp)
            material.suite.setRTCPPolicy(&policy.rtcp)
            policy.ssrc.type = type
            policy.ssrc.value = ssrc
            policy.window_size = UInt(options.replayWindowSize)
            policy.allow_repeat_tx = options.allowRepeatTransmission ? 1 : 0
            policy.next = nil
            // libsrtp copies key and MKI during srtp_create/srtp_add_stream and never writes
            // through these pointers.
            let keyPointer = UnsafeMutablePointer(
                mutating: keyAndSalt.baseAddress!.assumingMemoryBound(to: UInt8.self))
            guard let mki = material.mki else {
                policy.key = keyPointer
                return body(&policy)
            }
            // RFC 3711 section 3.1: the MKI is written big-endian in `length` bytes.
            var mkiBytes = [UInt8](repeating: 0, count: mki.length)
            for i in 0..<min(mki.length, 8) {
                mkiBytes[mki.length - 1 - i] = UInt8(truncatingIfNeeded: mki.value >> UInt64(8 * i))
            }
            return mkiBytes.withUnsafeMutableBufferPointer { mkiBuffer in
                var master = srtp_master_key_t(
                    key: keyPointer, mki_id: mkiBuffer.baseAddress,
                    mki_size: UInt32(mki.length))
                return withUnsafeMutablePointer(to: &master) { masterPointer in
                    var keys: UnsafeMutablePointer<srtp_master_key_t>? = masterPointer
                    return withUnsafeMutablePointer(to: &keys) { keysPointer in
                        policy.key = nil
                        policy.keys = keysPointer
                        policy.num_master_keys = 1
                        return body(&policy)
                    }
                }
            }
        }
    }

    private static func add(
        to session: srtp_t, material: SRTPKeyMaterial, type: srtp_ssrc_type_t,
        ssrc: UInt32, options: Options
    ) -> srtp_err_status_t {
        withPolicy(material: material, type: type, ssrc: ssrc, options: options) { policy in
            srtp_add_stream(session, &policy)
        }
    }

    /// Adds a stream for one SSRC with this context's key and options (libsrtp `ssrc_specific`).
    /// Throws `.badParam` if the SSRC already has a stream. Control-plane cost: allocates.
    public func addStream(ssrc: UInt32) throws(SRTPError) {
        let status = lock.withLock { _ in
            // libsrtp 2.5 would silently add a second stream for the same SSRC; refuse instead.
            var roc: UInt32 = 0
            if srtp_get_stream_roc(session, ssrc, &roc) == srtp_err_status_ok {
                return srtp_err_status_bad_param
            }
            return Self.add(to: session, material: key, type: ssrc_specific, ssrc: ssrc, options: options)
        }
        try status.check()
    }

    /// Removes the stream of one SSRC (including one cloned from the wildcard), forgetting its
    /// rollover counter and replay state. Throws `.noSuchSSRC` if there is none.
    public func removeStream(ssrc: UInt32) throws(SRTPError) {
        // libsrtp takes the SSRC in network byte order here.
        let status = lock.withLock { _ in srtp_remove_stream(session, ssrc.bigEndian) }
        try status.check()
    }

    /// The rollover counter libsrtp holds for `ssrc` (RFC 3711 section 3.3.1), for signalling it to
    /// a peer that joins late. Throws `.badParam` when the SSRC has no stream yet.
    public func rolloverCounter(ssrc: UInt32) throws(SRTPError) -> UInt32 {
        var roc: UInt32 = 0
        let status = lock.withLock { _ in srtp_get_stream_roc(session, ssrc, &roc) }
        try status.check()
        return roc
    }

    /// Sets the rollover counter for `ssrc`'s stream (a receiver joining a stream mid-way).
    /// Throws `.badParam` when the SSRC has no stream yet (add it with `addStream` first).
    public func setRolloverCounter(_ roc: UInt32, ssrc: UInt32) throws(SRTPError) {
        let status = lock.withLock { _ in srtp_set_stream_roc(session, ssrc, roc) }
        try status.check()
    }

    // MARK: Sizes

    /// Bytes `protect` adds to an RTP packet with `suite` and no MKI: size buffers before a
    /// context exists (an MTU budget, a pool of packet buffers).
    public static func overhead(_ suite: SRTPSuite) -> Int { suite.rtpOverhead }
    /// Bytes `protectRTCP` adds to an RTCP packet with `suite` and no MKI.
    public static func rtcpOverhead(_ suite: SRTPSuite) -> Int { suite.rtcpOverhead }

    /// Bytes `protect` adds to each RTP packet: the suite's tag plus the MKI, if any.
    public var rtpOverhead: Int { suite.rtpOverhead + mkiLength }
    /// Bytes `protectRTCP` adds to each RTCP packet: E flag and index, tag, and the MKI, if any.
    public var rtcpOverhead: Int { suite.rtcpOverhead + mkiLength }

    /// Buffer size `protect` needs for an RTP packet of `rtpLength` bytes.
    public func maxProtectedSize(for rtpLength: Int) -> Int { rtpLength + rtpOverhead }
    /// Buffer size `protectRTCP` needs for an RTCP packet of `rtcpLength` bytes.
    public func maxProtectedSize(forRTCP rtcpLength: Int) -> Int { rtcpLength + rtcpOverhead }

    // MARK: Packets

    /// Protects the RTP packet in `packet[0..<length]` in place (RFC 3711 section 3.3; RFC 7714
    /// section 5 for AEAD) and returns the SRTP length (`length + rtpOverhead`).
    /// Throws `.bufferTooSmall` when the span cannot take the tag, `.badParam` for a malformed RTP
    /// header, `.replayFail` when resending an index without `allowRepeatTransmission`,
    /// `.noSuchSSRC` when the SSRC has no stream, `.keyExpired` at the key's packet limit.
    /// `length` beyond the span's count is a programmer error and traps.
    /// Thread rule: as the context's. Cost: one libsrtp call, no copy.
    public func protect(_ packet: inout MutableRawSpan, length: Int) throws(SRTPError) -> Int {
        try packet.withUnsafeMutableBytes { (buffer) throws(SRTPError) in
            try process(buffer, length: length, growth: rtpOverhead) { srtp_protect_mki($0, $1, $2, useMKI, 0) }
        }
    }

    /// Verifies and decrypts the SRTP packet in `packet[0..<length]` in place and returns the RTP
    /// length. Throws `.authFail` when the tag does not verify (tampered, or another key),
    /// `.replayFail` for an index already received, `.replayOld` for one older than the replay
    /// window, `.badParam` for a malformed or too-short packet, `.noSuchSSRC` for an unknown SSRC,
    /// `.badMKI` when the packet's MKI is not this context's. On error the bytes are unspecified.
    /// Thread rule: as the context's. Cost: one libsrtp call, no copy.
    public func unprotect(_ packet: inout MutableRawSpan, length: Int) throws(SRTPError) -> Int {
        try packet.withUnsafeMutableBytes { (buffer) throws(SRTPError) in
            try process(buffer, length: length, growth: 0) { srtp_unprotect_mki($0, $1, $2, useMKI) }
        }
    }

    /// Protects the (compound) RTCP packet in `packet[0..<length]` in place (RFC 3711 section 3.4)
    /// and returns the SRTCP length (`length + rtcpOverhead`); errors as `protect`.
    /// Thread rule: as the context's. Cost: one libsrtp call, no copy.
    public func protectRTCP(_ packet: inout MutableRawSpan, length: Int) throws(SRTPError) -> Int {
        try packet.withUnsafeMutableBytes { (buffer) throws(SRTPError) in
            try process(buffer, length: length, growth: rtcpOverhead) { srtp_protect_rtcp_mki($0, $1, $2, useMKI, 0) }
        }
    }

    /// Verifies and decrypts the SRTCP packet in `packet[0..<length]` in place and returns the
    /// RTCP length; errors as `unprotect` (replay uses the SRTCP index).
    /// Thread rule: as the context's. Cost: one libsrtp call, no copy.
    public func unprotectRTCP(_ packet: inout MutableRawSpan, length: Int) throws(SRTPError) -> Int {
        try packet.withUnsafeMutableBytes { (buffer) throws(SRTPError) in
            try process(buffer, length: length, growth: 0) { srtp_unprotect_rtcp_mki($0, $1, $2, useMKI) }
        }
    }

    @inline(__always)
    private func process(
        _ buffer: UnsafeMutableRawBufferPointer, length: Int, growth: Int,
        _ call: (srtp_t?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?)
            -> srtp_err_status_t
    )
        throws(SRTPError) -> Int
    {
        precondition(
            length >= 0 && length <= buffer.count && buffer.count <= Int32.max,
            "SRTP packet length \(length) outside its buffer of \(buffer.count) bytes")
        guard buffer.count - length >= growth else { throw .bufferTooSmall }
        guard let base = buffer.baseAddress, length > 0 else { throw .badParam }
        var octets = Int32(length)
        let status = lock.withLock { _ in call(session, base, &octets) }
        try status.check()
        return Int(octets)
    }
}
