#if canImport(Glibc)
    import Glibc
#endif

/// The Ogg Opus identification header, `OpusHead` (RFC 7845 §5.1). Only channel mapping family 0
/// (mono or stereo) is handled.
/// Thread rule: a value type. Cost: none.
public struct OggOpusHead: Hashable, Sendable {
    /// Encapsulation version; 1 is what RFC 7845 defines (readers accept 0...15).
    public var version: UInt8 = 1
    /// Output channels: 1 or 2.
    public var channelCount: Int
    /// Samples at 48 kHz to discard from the decoder's output at the start (the encoder's
    /// lookahead; libopus reports it as `OPUS_GET_LOOKAHEAD`, 312 at 48 kHz by default).
    public var preSkip: Int
    /// Sample rate of the original input, for information only (playback is at 48 kHz or any rate).
    public var inputSampleRate: Int
    /// Gain to apply on output, Q7.8 dB (256 = +1 dB).
    public var outputGain: Int16
    /// Channel mapping family: 0 (RTP mapping, 1-2 channels).
    public var mappingFamily: UInt8 = 0

    /// A version 1, mapping family 0 header.
    public init(channelCount: Int, preSkip: Int = 312, inputSampleRate: Int = 48_000, outputGain: Int16 = 0) {
        self.channelCount = channelCount; self.preSkip = preSkip
        self.inputSampleRate = inputSampleRate; self.outputGain = outputGain
    }

    /// The 19-byte packet.
    public var bytes: [UInt8] {
        var b: [UInt8] = []
        b.append(contentsOf: "OpusHead".utf8)
        b.append(version); b.append(UInt8(channelCount))
        b.appendU16(UInt16(preSkip), .little); b.appendU32(UInt32(inputSampleRate), .little)
        b.appendU16(UInt16(bitPattern: outputGain), .little); b.append(mappingFamily)
        return b
    }

    /// Parses an `OpusHead` packet; `path` names the file in errors.
    package static func parse(_ p: ArraySlice<UInt8>, path: String) throws(ContainerError) -> OggOpusHead {
        let b = Array(p)
        guard b.count >= 19, b[0..<8].elementsEqual("OpusHead".utf8) else {
            throw ContainerError(.malformed, path: path, "OpusHead header is shorter than 19 bytes")
        }
        guard b[8] & 0xF0 == 0 else {
            throw ContainerError(.unsupported, path: path, "unsupported Ogg Opus version \(b[8])")
        }
        let channels = Int(b[9])
        guard channels >= 1 else { throw ContainerError(.malformed, path: path, "OpusHead declares 0 channels") }
        let family = b[18]
        guard family == 0 else {
            throw ContainerError(
                .unsupported, path: path,
                "channel mapping family \(family) is not supported (only family 0: mono or stereo)")
        }
        guard channels <= 2 else {
            throw ContainerError(
                .malformed, path: path, "OpusHead declares \(channels) channels with mapping family 0 (at most 2)")
        }
        var h = OggOpusHead(
            channelCount: channels, preSkip: Int(b.span.bytes.u16(10, .little)),
            inputSampleRate: Int(b.span.bytes.u32(12, .little)),
            outputGain: Int16(bitPattern: b.span.bytes.u16(16, .little)))
        h.version = b[8]
        h.mappingFamily = family
        return h
    }
}

/// The Ogg Opus comment header, `OpusTags` (RFC 7845 §5.2): a vendor string and
/// `NAME=value` comments.
/// Thread rule: a value type. Cost: none.
public struct OggOpusTags: Hashable, Sendable {
    /// The encoder's vendor string (`libopus 1.3.1`, `Revue`).
    public var vendor: String
    /// The user comments, each `NAME=value`.
    public var comments: [String]

    /// Tags with a vendor string and comments.
    public init(vendor: String = "Revue", comments: [String] = []) {
        self.vendor = vendor; self.comments = comments
    }

    /// The packet.
    public var bytes: [UInt8] {
        var b: [UInt8] = []
        b.append(contentsOf: "OpusTags".utf8)
        b.appendU32(UInt32(vendor.utf8.count), .little); b.append(contentsOf: vendor.utf8)
        b.appendU32(UInt32(comments.count), .little)
        for c in comments { b.appendU32(UInt32(c.utf8.count), .little); b.append(contentsOf: c.utf8) }
        return b
    }

    /// The value of the first comment named `name` (case-insensitive, as Vorbis comments are).
    public func value(for name: String) -> String? {
        let key = name.uppercased() + "="
        for c in comments where c.uppercased().hasPrefix(key) { return String(c.dropFirst(key.count)) }
        return nil
    }

    static func parse(_ p: ArraySlice<UInt8>, path: String) throws(ContainerError) -> OggOpusTags {
        let b = Array(p)
        func bad(_ what: String) -> ContainerError {
            ContainerError(.malformed, path: path, "OpusTags header is malformed: \(what)")
        }
        guard b.count >= 16, b[0..<8].elementsEqual("OpusTags".utf8) else { throw bad("shorter than 16 bytes") }
        var at = 8
        let vendorLength = Int(b.span.bytes.u32(at, .little)); at += 4
        guard vendorLength <= b.count - at else { throw bad("vendor string runs past the packet") }
        let vendor = String(decoding: b[at..<(at + vendorLength)], as: UTF8.self); at += vendorLength
        guard b.count - at >= 4 else { throw bad("no comment count") }
        let count = Int(b.span.bytes.u32(at, .little)); at += 4
        guard count <= (b.count - at) / 4 else { throw bad("comment count \(count) does not fit in the packet") }
        var comments: [String] = []
        comments.reserveCapacity(count)
        for i in 0..<count {
            guard b.count - at >= 4 else { throw bad("comment \(i) has no length") }
            let n = Int(b.span.bytes.u32(at, .little)); at += 4
            guard n <= b.count - at else { throw bad("comment \(i) runs past the packet") }
            comments.append(String(decoding: b[at..<(at + n)], as: UTF8.self)); at += n
        }
        return OggOpusTags(vendor: vendor, comments: comments)
    }
}

/// One audio packet from an Ogg Opus stream with what a decoder needs to output exactly the
/// original samples: decode the packet, then drop `discardStart` samples (pre-skip) from the start
/// and `discardEnd` (end trimming) from the end of its output. All counts are at 48 kHz.
public struct OggOpusPacket: Hashable, Sendable {
    /// Bytes of the packet (in the caller's buffer).
    public var byteCount: Int
    /// Duration of the packet from its TOC (RFC 6716 §3.1).
    public var sampleCount: Int
    /// Granule position at the end of this packet: samples from the stream's granule origin,
    /// pre-skip included (RFC 7845 §4).
    public var granuleEnd: Int64
    /// Samples to drop from the start of this packet's decoded output (the pre-skip).
    public var discardStart: Int
    /// Samples to drop from the end of this packet's decoded output (end trimming on the last page).
    public var discardEnd: Int
    /// The last packet of the stream (its page has the end-of-stream flag).
    public var isLast: Bool
    /// Samples to keep from this packet's output.
    public var outputSampleCount: Int { max(0, sampleCount - discardStart - discardEnd) }
}

/// Reads an Ogg Opus file (RFC 7845) packet by packet, streaming: finds the Opus logical stream,
/// parses OpusHead and OpusTags, checks page CRCs, reassembles packets across pages and works out
/// the pre-skip and end trimming of each packet from the granule positions (§4).
/// Thread rule: one thread at a time; it may be handed to another thread between calls.
/// Cost: one copy of each packet into the caller's buffer.
/// Not `Sendable`: it has one owner; move it to another thread or task with `sending`.
public final class OggOpusReader {
    /// The file being read, as given.
    public let path: String
    /// The identification header (`OpusHead`) read from the first page.
    public let head: OggOpusHead
    /// The comment header (`OpusTags`) read from the second page.
    public let tags: OggOpusTags
    /// Serial number of the Opus logical stream.
    public let serial: UInt32
    /// Packets read so far (audio only).
    public private(set) var packetsRead = 0
    /// Granule position at which the audio starts (0 for files that start at the beginning).
    public private(set) var startGranule: Int64 = 0
    /// The granule position of the last page, once the end-of-stream page has been read.
    public private(set) var finalGranule: Int64?
    /// Pages with a bad CRC that were skipped (tolerant mode only; strict mode throws).
    public var corruptPages: Int { pages.corruptPages }
    /// Pages missing from the sequence numbers of the Opus stream.
    public var lostPages: Int { assembler.lostPages }

    private let pages: OggPageReader
    private var assembler = OggPacketAssembler(maximumPacketSize: 1 << 24)
    private var queue: [(range: Range<Int>, info: OggOpusPacket)] = []
    private var queueIndex = 0
    private var runningGranule: Int64 = 0
    private var sawAudioPage = false
    private var ended = false

    /// Opens `path` and reads the headers. In `strict` mode (the default) a bad CRC, lost sync or
    /// truncated page throws; otherwise damaged pages are skipped and counted in `corruptPages`.
    public init(path: String, strict: Bool = true) throws(ContainerError) {
        self.path = path
        pages = try OggPageReader(path: path, strict: strict)
        // Find the beginning-of-stream page whose first packet is OpusHead (RFC 7845 §3).
        var found: (UInt32, OggOpusHead)?
        while found == nil {
            guard try pages.nextPage() else {
                if pages.pagesRead == 0 { throw ContainerError(.truncated, path: path, "file is empty (no Ogg pages)") }
                throw ContainerError(.badMagic, path: path, "not an Ogg Opus file (no OpusHead header)")
            }
            let p = pages.page
            guard p.flags.contains(.beginningOfStream) else {
                throw ContainerError(.badMagic, path: path, "not an Ogg Opus file (no OpusHead header)")
            }
            if p.body.starts(with: Array("OpusHead".utf8)) {
                guard p.lacing.count >= 1, p.lacing.last! < 255, p.lacing.dropLast().allSatisfy({ $0 == 255 }) else {
                    throw ContainerError(.malformed, path: path, "the OpusHead page must hold exactly one packet (RFC 7845 §3)")
                }
                found = (p.serial, try OggOpusHead.parse(p.body[...], path: path))
                _ = assembler.add(p)
            }
        }
        serial = found!.0
        head = found!.1
        // OpusTags: the next packet, ending its page (RFC 7845 §3, §5.2).
        var tags: OggOpusTags?
        while tags == nil {
            guard try pages.nextPage() else {
                throw ContainerError(.truncated, path: path, "file ends before the OpusTags header")
            }
            let p = pages.page
            guard p.serial == serial else { continue }
            guard assembler.add(p) else {
                throw ContainerError(.tooLarge, path: path, "OpusTags header is larger than 16 MiB")
            }
            if let first = assembler.packets.first {
                guard assembler.packets.count == 1, !assembler.hasIncompletePacket else {
                    throw ContainerError(
                        .malformed, path: path, "audio data shares a page with OpusTags (RFC 7845 §3 forbids it)")
                }
                guard assembler.bytes[first].starts(with: Array("OpusTags".utf8)) else {
                    throw ContainerError(.malformed, path: path, "the second packet is not OpusTags")
                }
                tags = try OggOpusTags.parse(assembler.bytes[first], path: path)
            }
        }
        self.tags = tags!
    }

    /// The pre-skip from OpusHead.
    public var preSkip: Int { head.preSkip }

    /// Loads the next page of the Opus stream that completes packets into the queue.
    private func loadPage() throws(ContainerError) -> Bool {
        while true {
            if ended { return false }
            guard try pages.nextPage() else {
                ended = true
                return false
            }
            let p = pages.page
            guard p.serial == serial else { continue }
            if p.flags.contains(.beginningOfStream) { continue }  // a chained stream reusing the serial
            guard assembler.add(p) else {
                throw ContainerError(.tooLarge, path: path, "page \(p.index): an audio packet is larger than 16 MiB")
            }
            let eos = p.flags.contains(.endOfStream)
            if eos { ended = true }
            if assembler.packets.isEmpty {
                if eos { finalGranule = p.granule }
                if eos { return false }
                continue
            }
            queue.removeAll(keepingCapacity: true)
            queueIndex = 0
            var total: Int64 = 0
            for (n, r) in assembler.packets.enumerated() {
                let count = assembler.bytes[r].withUnsafeBytes { OpusPacketInfo.sampleCount($0.bytes) }
                guard let samples = count else {
                    throw ContainerError(
                        .malformed, path: path,
                        "packet \(packetsRead + n) (page \(p.index)) is not a valid Opus packet (bad TOC)")
                }
                total += Int64(samples)
                queue.append(
                    (
                        r,
                        OggOpusPacket(
                            byteCount: r.count, sampleCount: samples, granuleEnd: 0,
                            discardStart: 0, discardEnd: 0, isLast: false)
                    ))
            }
            if !sawAudioPage {
                sawAudioPage = true
                // RFC 7845 §4.5: the first audio page's granule minus its packets' durations is
                // the starting granule; less than zero is only valid on a last page (end trimming).
                if p.granule >= total {
                    startGranule = p.granule - total
                } else if eos {
                    startGranule = 0
                } else {
                    throw ContainerError(
                        .malformed, path: path,
                        "first audio page's granule position \(p.granule) is smaller than its \(total) samples")
                }
                runningGranule = startGranule
            } else if !eos && p.granule != -1 && p.granule != runningGranule + total {
                runningGranule = p.granule - total  // a gap: trust the page
            }
            var end = runningGranule
            for i in queue.indices {
                end += Int64(queue[i].info.sampleCount)
                queue[i].info.granuleEnd = end
                let begin = end - Int64(queue[i].info.sampleCount)
                let skipLeft = Int64(head.preSkip) - (begin - startGranule)
                if skipLeft > 0 { queue[i].info.discardStart = Int(min(skipLeft, Int64(queue[i].info.sampleCount))) }
            }
            runningGranule = end
            if eos {
                finalGranule = p.granule
                var trim = end - p.granule  // end trimming (RFC 7845 §4.4)
                for i in queue.indices.reversed() where trim > 0 {
                    let room = Int64(queue[i].info.sampleCount - queue[i].info.discardStart)
                    let cut = min(trim, max(0, room))
                    queue[i].info.discardEnd = Int(cut)
                    queue[i].info.granuleEnd = min(queue[i].info.granuleEnd, p.granule)
                    trim -= cut
                }
                queue[queue.count - 1].info.isLast = true
            }
            return true
        }
    }

    /// Reads the next audio packet into `buffer` (its capacity is reused, so steady reading does
    /// not allocate). Returns the packet's timing and trimming, nil at the end of the stream.
    public func readPacket(into buffer: inout [UInt8]) throws(ContainerError) -> OggOpusPacket? {
        if queueIndex >= queue.count {
            guard try loadPage() else { return nil }
        }
        let (range, info) = queue[queueIndex]
        queueIndex += 1
        buffer.removeAll(keepingCapacity: true)
        buffer.append(contentsOf: assembler.bytes[range])
        packetsRead += 1
        return info
    }
}

/// Writes an Ogg Opus file (RFC 7845) from encoded packets, atomically: OpusHead and OpusTags on
/// their own pages, granule positions counting 48 kHz samples including the pre-skip, pages
/// flushed every `maximumPageDuration` samples (1 s by default), the end-of-stream flag and
/// optional end trimming on the last page. The file appears under its name only after `finish()`.
/// Thread rule: one thread at a time; it may be handed to another thread between calls.
/// Cost: each packet is copied once into its page.
/// Not `Sendable`: it has one owner; move it to another thread or task with `sending`.
public final class OggOpusWriter {
    /// The destination path, as given.
    public let path: String
    /// The identification header (`OpusHead`) written on the first page.
    public let head: OggOpusHead
    /// The comment header (`OpusTags`) written on the second page.
    public let tags: OggOpusTags
    /// Audio samples (48 kHz) a page may hold before it is written out: bounds the data lost if the
    /// process dies and the delay for a reader following the file. Default 48 000 (1 s).
    public var maximumPageDuration = 48_000
    /// Packets written so far.
    public private(set) var packetsWritten = 0
    /// Granule position after the last packet written (pre-skip included).
    public private(set) var granule: Int64 = 0

    private let file: ContainerFileWriter
    private let pages: OggPageWriter
    private var pendingDuration = 0
    private var lastPacketSamples = 0

    /// Creates the (temporary) output and writes the two header pages. `head.preSkip` should be
    /// the encoder's lookahead at 48 kHz. `serial` defaults to a random number.
    public init(
        path: String, head: OggOpusHead, tags: OggOpusTags = OggOpusTags(),
        serial: UInt32 = UInt32.random(in: 1...UInt32.max)
    ) throws(ContainerError) {
        precondition((1...2).contains(head.channelCount) && head.mappingFamily == 0, "OggOpusWriter: 1-2 channels, family 0")
        precondition((0...65535).contains(head.preSkip), "OggOpusWriter: pre-skip out of range")
        self.path = path; self.head = head; self.tags = tags
        file = try ContainerFileWriter(path: path)
        pages = OggPageWriter(file: file, serial: serial)
        let id = head.bytes
        pages.append(id.span.bytes, granule: 0)
        try pages.flush(flags: .beginningOfStream)
        let comment = tags.bytes
        pages.append(comment.span.bytes, granule: 0)
        try pages.flush()
    }

    /// Convenience: mono or stereo with the given pre-skip (encoder lookahead) and input rate.
    public convenience init(
        path: String, channelCount: Int, preSkip: Int = 312, inputSampleRate: Int = 48_000,
        vendor: String = "Revue", comments: [String] = []
    ) throws(ContainerError) {
        try self.init(
            path: path,
            head: OggOpusHead(channelCount: channelCount, preSkip: preSkip, inputSampleRate: inputSampleRate),
            tags: OggOpusTags(vendor: vendor, comments: comments))
    }

    /// Appends one Opus packet lasting `sampleCount` samples at 48 kHz (what the encoder was given,
    /// e.g. 960 for 20 ms; for packets from the network, `OpusPacketInfo.sampleCount`). Throws,
    /// writing nothing, when the packet is empty or its TOC says another duration (packets from the
    /// network can be anything); traps on a duration outside 1...5760 (a programmer error).
    public func write(_ packet: RawSpan, sampleCount: Int) throws(ContainerError) {
        precondition(sampleCount > 0 && sampleCount <= 5760, "OggOpusWriter: packet duration out of range")
        guard packet.byteCount >= 1 else {
            throw ContainerError(
                .malformed, path: path, "packet \(packetsWritten) is empty (an Ogg Opus packet has at least a TOC byte)")
        }
        if let toc = OpusPacketInfo.sampleCount(packet), toc != sampleCount {
            throw ContainerError(
                .malformed, path: path,
                "packet \(packetsWritten) lasts \(toc) samples by its TOC, not \(sampleCount)")
        }
        if pages.hasPending
            && (pendingDuration >= maximumPageDuration
                || pages.pendingLacingCount + OggPageWriter.lacingCount(packet.byteCount) > 255)
        {
            try pages.flush()
            pendingDuration = 0
        }
        granule += Int64(sampleCount)
        pages.append(packet, granule: granule)
        pendingDuration += sampleCount
        lastPacketSamples = sampleCount
        packetsWritten += 1
    }

    /// Array convenience for `write(_:sampleCount:)`.
    public func write(_ packet: [UInt8], sampleCount: Int) throws(ContainerError) {
        try write(packet.span.bytes, sampleCount: sampleCount)
    }

    /// Writes the last page with the end-of-stream flag, then fsyncs and renames into place.
    /// `originalSampleCount` is the number of input samples (at 48 kHz) the file should decode to:
    /// the final granule becomes `preSkip + originalSampleCount`, trimming the padding of the last
    /// packet (RFC 7845 §4.4). Without it the whole last packet plays.
    public func finish(originalSampleCount: Int64? = nil) throws(ContainerError) {
        var end: Int64?
        if let n = originalSampleCount {
            let target = Int64(head.preSkip) + n
            precondition(target <= granule, "OggOpusWriter.finish: more samples than were written")
            precondition(
                target > granule - Int64(pendingDuration) || packetsWritten == 0,
                "OggOpusWriter.finish: trimming beyond the last page")
            end = target
        }
        if packetsWritten == 0 { end = end ?? 0 }
        try pages.flush(flags: .endOfStream, endGranule: end)
        try file.finish()
    }

    /// Discards the output; nothing is left on disk.
    public func abort() { file.abort() }
}
