import MediaCore

extension FuzzEntries {
    /// The base key every SFrame fuzz key derives from (public so the seed writer encrypts seeds
    /// with it): the fuzzer cannot forge tags, so the paths past authentication are reached by
    /// the seeds and by encrypting the input first (mode 1).
    public static let sframeBaseKey: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 7) }
    /// The key IDs the fuzz receivers hold (one-byte and longer KID encodings).
    public static let sframeKeyIDs: [UInt64] = [0, 7, 8, 300]

    /// SFrame (RFC 9605) entry: byte 0 picks the suite (bits 0-2), the clear prefix (bits 3-6: 0-15
    /// bytes, as a media format leaves in front of the header) and the mode (bit 7); the rest is a
    /// frame. Mode 0 takes it as received from the network: its header, when it parses, must
    /// encode back to the same values, and a fresh receiver holding the fuzz keys decrypts it; a
    /// frame that decrypts must be exactly what a sender with that key ID and counter makes of the
    /// plaintext. Mode 1 takes it as a plaintext frame: a sender encrypts it (key ID and counter
    /// from its length) and the receiver must give it back.
    @Sendable public static func sframe(_ data: UnsafeRawBufferPointer) {
        guard let selector = data.first else { return }
        let suites = SFrameCipherSuite.allCases
        let suite = suites[Int(selector & 7) % suites.count]
        let prefix = Int(selector >> 3 & 15)
        let body = UnsafeRawBufferPointer(rebasing: data[1...])
        guard let receiver = sframeReceiver(suite) else { return }
        let capacity = body.count + SFrameHeader.maxLength + suite.tagLength + 16
        let output = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
        let again = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
        defer {
            output.deallocate()
            again.deallocate()
        }
        if selector & 0x80 == 0 {
            if body.count > prefix,
                let (header, length) = try? SFrameHeader.parse(UnsafeRawBufferPointer(rebasing: body[prefix...]).bytes)
            {
                let reparsed = try? SFrameHeader.parse(header.bytes)
                fuzzRequire(
                    length <= SFrameHeader.maxLength && reparsed?.header == header && reparsed?.length == header.encodedLength,
                    "header \(header) does not encode back")
            }
            guard let n = try? receiver.decryptFrame(body, clearPrefix: prefix, into: output) else { return }
            fuzzRequire(n >= 0 && n <= body.count, "decrypted \(n) bytes from \(body.count)")
            guard body.count > prefix,
                let (header, _) = try? SFrameHeader.parse(UnsafeRawBufferPointer(rebasing: body[prefix...]).bytes),
                let sender = try? SFrameSender(
                    suite: suite, keyID: header.keyID, baseKey: sframeBaseKey, initialCounter: header.counter),
                let m = try? sender.encryptFrame(
                    UnsafeRawBufferPointer(rebasing: output[0..<n]), clearPrefix: prefix, into: again)
            else {
                fuzzRequire(false, "a frame that decrypts cannot be made again")
                return
            }
            fuzzRequire(
                m == body.count && again.prefix(m).elementsEqual(body), "a decrypted frame is not what its sender makes of it")
        } else {
            let keyID = sframeKeyIDs[body.count % sframeKeyIDs.count]
            let counter = UInt64(body.count) << 40 | UInt64(body.count)
            guard let sender = try? SFrameSender(suite: suite, keyID: keyID, baseKey: sframeBaseKey, initialCounter: counter)
            else {
                return
            }
            let m: Int
            do throws(SFrameError) {
                m = try sender.encryptFrame(body, clearPrefix: prefix, into: output)
            } catch {
                fuzzRequire(
                    error == .frameShorterThanClearPrefix && body.count < prefix,
                    "a sender refused a \(body.count)-byte frame with a \(prefix)-byte prefix: \(error)")
                return
            }
            let n = try? receiver.decryptFrame(UnsafeRawBufferPointer(rebasing: output[0..<m]), clearPrefix: prefix, into: again)
            fuzzRequire(n == body.count && again.prefix(body.count).elementsEqual(body), "a frame did not survive SFrame")
        }
    }

    /// A fresh receiver of `suite` holding every fuzz key (no replay state carries between inputs).
    static func sframeReceiver(_ suite: SFrameCipherSuite) -> SFrameReceiver? {
        let receiver = SFrameReceiver(suite: suite)
        for id in sframeKeyIDs { guard (try? receiver.addKey(keyID: id, baseKey: sframeBaseKey)) != nil else { return nil } }
        return receiver
    }
}
