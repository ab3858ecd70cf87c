/// Which RFC 8285 extension IDs a stream uses for each element it understands (normally agreed in
/// SDP `a=extmap`). `nil` means the element is not sent and ignored on receive.
/// Thread rule: a value type. Cost: none.
public struct RTPExtensionMap: Sendable, Equatable {
    /// ID of the RFC 6464 client-to-mixer audio level element (`urn:ietf:params:rtp-hdrext:ssrc-audio-level`).
    public var audioLevel: UInt8?
    /// ID of abs-send-time (`http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time`).
    public var absSendTime: UInt8?
    /// ID of the transport-wide sequence number
    /// (`http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01`).
    public var transportSequenceNumber: UInt8?

    /// The IDs libwebrtc offers by default for audio: audio level 1, abs-send-time 3, transport-cc 5.
    public init(audioLevel: UInt8? = 1, absSendTime: UInt8? = 3, transportSequenceNumber: UInt8? = 5) {
        self.audioLevel = audioLevel
        self.absSendTime = absSendTime
        self.transportSequenceNumber = transportSequenceNumber
    }
}

/// The RFC 6464 §3 audio level element: one byte, V flag (voice activity) in the top bit and the
/// level in -dBov from 0 (loudest) to 127 (silence, -127 dBov or below).
/// Thread rule: a value type. Cost: none.
public struct RTPAudioLevel: Sendable, Equatable {
    /// RFC 6464 §3 "V": the sender believes the packet contains voice.
    public var voiceActivity: Bool
    /// Level as a positive number of dB below overload: 0 = 0 dBov, 127 = -127 dBov (silence).
    public var level: UInt8

    /// Makes an element; `level` is clamped to 0...127.
    public init(voiceActivity: Bool, level: Int) {
        self.voiceActivity = voiceActivity
        self.level = UInt8(max(0, min(127, level)))
    }

    /// Makes an element from a level in dBov (0 or negative); values below -127 become 127.
    public init(voiceActivity: Bool, dBov: Double) {
        let l = dBov.isFinite ? Int((-dBov).rounded()) : 127
        self.init(voiceActivity: voiceActivity, level: l)
    }

    /// The wire byte (RFC 6464 §3 figure 1).
    public var byte: UInt8 { (voiceActivity ? 0x80 : 0) | (level & 0x7F) }

    /// Decodes the wire byte.
    public init(byte: UInt8) { voiceActivity = byte & 0x80 != 0; level = byte & 0x7F }

    /// Level in dBov (0 or negative).
    public var dBov: Double { -Double(level) }
}

/// abs-send-time: a 24-bit unsigned 6.18 fixed-point number of seconds (wraps every 64 s) giving
/// the send time, used by receive-side bandwidth estimation (webrtc.org "abs-send-time").
/// Thread rule: a value type. Cost: none.
public struct RTPAbsSendTime: Sendable, Equatable {
    /// The raw 24-bit value: seconds * 2^18 modulo 2^24.
    public var rawValue: UInt32

    /// Makes the element from its raw 24-bit value (upper bits ignored).
    public init(rawValue: UInt32) { self.rawValue = rawValue & 0xFF_FFFF }

    /// Makes the element from a time in nanoseconds on any clock (only the value modulo 64 s matters).
    /// Rounds to the nearest 1/262144 s.
    public init(nanoseconds: UInt64) {
        // (ns << 18) / 1e9 without overflow: split into whole seconds and the remainder.
        let seconds = nanoseconds / 1_000_000_000
        let rest = nanoseconds % 1_000_000_000
        let frac = (rest << 18 + 500_000_000) / 1_000_000_000
        self.init(rawValue: UInt32(truncatingIfNeeded: (seconds << 18) + frac))
    }

    /// Seconds in [0, 64).
    public var seconds: Double { Double(rawValue) / 262_144.0 }
}

extension RTPHeaderExtensions {
    /// Sets the RFC 6464 audio level element under `id`.
    public mutating func setAudioLevel(_ level: RTPAudioLevel, id: UInt8) {
        set(id: id, bigEndian: UInt32(level.byte), length: 1)
    }
    /// The RFC 6464 audio level under `id`, or nil when absent or not 1 byte long.
    public func audioLevel(id: UInt8) -> RTPAudioLevel? {
        bigEndianValue(id: id, length: 1).map { RTPAudioLevel(byte: UInt8($0)) }
    }
    /// Sets the 3-byte abs-send-time element under `id`.
    public mutating func setAbsSendTime(_ time: RTPAbsSendTime, id: UInt8) {
        set(id: id, bigEndian: time.rawValue, length: 3)
    }
    /// The abs-send-time under `id`, or nil when absent or not 3 bytes long.
    public func absSendTime(id: UInt8) -> RTPAbsSendTime? {
        bigEndianValue(id: id, length: 3).map { RTPAbsSendTime(rawValue: $0) }
    }
    /// Sets the 2-byte transport-wide sequence number (draft-holmer-rmcat-transport-wide-cc-extensions-01 §2).
    public mutating func setTransportSequenceNumber(_ seq: UInt16, id: UInt8) {
        set(id: id, bigEndian: UInt32(seq), length: 2)
    }
    /// The transport-wide sequence number under `id`, or nil when absent or not 2 bytes long.
    public func transportSequenceNumber(id: UInt8) -> UInt16? {
        bigEndianValue(id: id, length: 2).map { UInt16($0) }
    }
}
