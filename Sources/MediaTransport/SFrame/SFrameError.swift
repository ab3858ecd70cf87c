/// Why an SFrame operation failed. A receiver meets the first four on input from the network and
/// drops the frame; the others are caller errors or a sender at the end of its counter.
/// Thread rule: a value type, freely shared. Cost: none.
public enum SFrameError: Error, Hashable, Sendable {
    /// The frame's KID names no key the receiver holds.
    case unknownKey
    /// The tag does not match: the frame (header, clear prefix, ciphertext or tag) was altered, or
    /// it was protected with another key.
    case authenticationFailed
    /// The frame is too short for its header or for the header and the tag.
    case malformedHeader
    /// The counter was already accepted for this KID, or is too old for the replay window.
    case replay
    /// A base key of the wrong length for the suite, or empty.
    case invalidKey
    /// The sender used every counter value under its key: rotate the key (`setKey`).
    case counterExhausted
    /// The output buffer is smaller than the result needs.
    case bufferTooSmall
    /// The receiver already holds its maximum number of keys: remove one first.
    case tooManyKeys
    /// OpenSSL failed (not a property of the input).
    case cryptoFailure
    /// A frame given to `encryptFrame` is shorter than the clear prefix asked for: a receiver,
    /// which takes the prefix length from the media format, could not find the header after it.
    case frameShorterThanClearPrefix
    /// The receiver binds senders (`SFrameReceiver.bind(ssrc:keyIDs:)`) and the frame's KID is not
    /// one its stream's sender announced (or the stream is bound to nobody): a key of another
    /// participant, or a stream the server mapped to the wrong sender.
    case wrongSender
}
