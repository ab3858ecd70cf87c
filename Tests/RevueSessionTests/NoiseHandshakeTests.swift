import MediaCore
import Testing

@testable import RevueSession

/// Noise_IK_25519_ChaChaPoly_BLAKE2b against the published noise-c test vector (noise-c
/// tests/vector/noise-c-basic.txt, also used by toxcore's crypto tests): fixed static and
/// ephemeral keys, prologue "Prologue123", two handshake messages and four transport messages.
@Suite struct NoiseHandshakeTests {
    static func h(_ s: String) -> [UInt8] { Hex.decode(s)! }

    let prologue = h("50726f6c6f677565313233")
    let initStatic = KeyPair(secret: h("e61ef9919cde45dd5f82166404bd08e38bceb5dfdfded0a34c8df7ed542214d1"))
    let initEphemeral = KeyPair(secret: h("893e28b9dc6ca8d611ab664754b8ceb7bac5117349a4439a6b0569da977c464a"))
    let respStatic = KeyPair(secret: h("4a3acbfdb163dec651dfa3194dece676d437029c62a408b4c5ea9114246e4893"))
    let respEphemeral = KeyPair(secret: h("bbdb4cdbd309f1a1f2e1456967fe288cadd6f712d65dc7b7793d5e63da6b375b"))
    let message1 = h(
        "ca35def5ae56cec33dc2036731ab14896bc4c75dbb07a61f879f8e3afa4c7944"
            + "ba83a447b38c83e327ad936929812f624884847b7831e95e197b2f797088efdd232fe541af156ec6d0657602902a8c3e"
            + "e64e470f4b6fcd9298ce0b56fe20f86e60d9d933ec6e103ffb09e6001d6abb64")
    let message2 = h(
        "95ebc60d2b1fa672c1f46a8aa265ef51bfe38e7ccb39ec5be34069f144808843"
            + "9f069b267a06b3de3ecb1043bcb09807c6cd101f3826192a65f11ef3fe4317")
    let handshakeHash = h(
        "00e51d2aac81a9b8ebe441d6af3e1c8efc0f030cc608332edcb42588ff6a0ce2"
            + "6415ddc106e95277a5e6d54132f1e5245976b89caf96d262f1fe5a7f0c55c078")

    @Test func publicKeysMatchVector() {
        #expect(respStatic.publicKey == Self.h("31e0303fd6418d2f8c0e78b91f22e8caed0fbe48656dcf4767e4834f701b8f62"))
        #expect(initEphemeral.publicKey == Self.h("ca35def5ae56cec33dc2036731ab14896bc4c75dbb07a61f879f8e3afa4c7944"))
    }

    @Test func handshakeAndTransportMatchVector() throws {
        var initiator = NoiseIKHandshake(
            initiator: true, prologue: prologue, localStatic: initStatic,
            remoteStatic: respStatic.publicKey, ephemeral: initEphemeral)
        var responder = NoiseIKHandshake(
            initiator: false, prologue: prologue, localStatic: respStatic,
            remoteStatic: nil, ephemeral: respEphemeral)
        let written1 = initiator.writeMessage1(payload: Self.h("4c756477696720766f6e204d69736573"))
        let m1 = try #require(written1)
        #expect(m1 == message1)
        let read1 = responder.readMessage1(m1)
        #expect(read1 == Self.h("4c756477696720766f6e204d69736573"))
        #expect(responder.remoteStatic == initStatic.publicKey)
        let written2 = responder.writeMessage2(payload: Self.h("4d757272617920526f746862617264"))
        let m2 = try #require(written2)
        #expect(m2 == message2)
        let read2 = initiator.readMessage2(m2)
        #expect(read2 == Self.h("4d757272617920526f746862617264"))
        #expect(initiator.handshakeHash == handshakeHash)
        #expect(responder.handshakeHash == handshakeHash)

        let i = initiator.transportKeys(), r = responder.transportKeys()
        #expect(i.send == r.receive && i.receive == r.send)
        // Transport messages: initiator n=0, responder n=0, initiator n=1, responder n=1; empty AD.
        let vectors: [(fromInitiator: Bool, n: UInt64, payload: String, ciphertext: String)] = [
            (true, 0, "462e20412e20486179656b", "cd54383060e7a28434cca27fb1cc524cfbabeb18181589df219d07"),
            (false, 0, "4361726c204d656e676572", "a856d3bf0246bfc476c655009cd1ed677b8dcc5b349ae8ef2a05f2"),
            (true, 1, "4a65616e2d426170746973746520536179", "49063084b2c51f098337cb8a13739ac848f907e67cfb2cc8a8b60586467aa02fc7"),
            (
                false, 1, "457567656e2042f6686d20766f6e2042617765726b",
                "8b9709d23b47e4639df7678d7a21741eba4ef1e9c60383001c7435549c20f9d56f30e935d3"
            ),
        ]
        for v in vectors {
            let key = v.fromInitiator ? i.send : r.send
            let sealed = Sodium.seal(key: key, nonce: v.n, ad: [], plaintext: Self.h(v.payload))
            #expect(sealed == Self.h(v.ciphertext))
            #expect(
                Sodium.open(key: v.fromInitiator ? r.receive : i.receive, nonce: v.n, ad: [], ciphertext: sealed)
                    == Self.h(v.payload))
        }
    }

    @Test func responderRejectsTamperedMessage1() {
        for position in [0, 40, 100, message1.count - 1] {
            var tampered = message1
            tampered[position] ^= 0x01
            var responder = NoiseIKHandshake(initiator: false, prologue: prologue, localStatic: respStatic, remoteStatic: nil)
            let read = responder.readMessage1(tampered)
            #expect(read == nil, "flipped byte \(position)")
        }
    }

    @Test func responderRejectsOtherPrologueAndTruncation() {
        var other = NoiseIKHandshake(initiator: false, prologue: [1, 2, 3], localStatic: respStatic, remoteStatic: nil)
        let readOther = other.readMessage1(message1)
        #expect(readOther == nil)
        var short = NoiseIKHandshake(initiator: false, prologue: prologue, localStatic: respStatic, remoteStatic: nil)
        let readShort = short.readMessage1(Array(message1.prefix(95)))
        #expect(readShort == nil)
    }
}
