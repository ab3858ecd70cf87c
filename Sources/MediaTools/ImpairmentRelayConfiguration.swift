import MediaCore

/// Errors in relay options: names the option and what is wrong with its value.
/// Thread rule: a value. Cost: none.
package struct ImpairmentRelayConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The option (`--loss`) or argument at fault.
    package var option: String
    /// What is wrong.
    package var reason: String
    /// A readable description, for logs and error messages.
    package var description: String { "\(option): \(reason)" }
}

extension ImpairmentRelay {
    /// Everything a relay needs; maps 1:1 to
    /// `revue-media relay --listen PORT --to HOST:PORT [--loss P] [--burst N] [--delay MS]
    /// [--jitter MS] [--reorder P] [--reorder-delay MS] [--duplicate P] [--rate BPS] [--queue MS]
    /// [--seed N] [--forward-only] [--loss-per-stream]`. Probabilities are fractions.
    /// Thread rule: a value. Cost: none.
    package struct Configuration: Sendable, Equatable {
        /// `--listen PORT` (all IPv4 interfaces) or `--listen HOST:PORT`: where the sender sends to.
        package var listen: SocketAddress
        /// `--to HOST:PORT`: where packets are forwarded; its replies go back to the last sender.
        package var to: SocketAddress
        /// Impairment from the sender to `to`.
        package var forward: ImpairmentModel.Settings
        /// Impairment of replies from `to` back to the sender (the same as `forward` unless
        /// `--forward-only`, which leaves replies unimpaired).
        package var reverse: ImpairmentModel.Settings
        /// `--seed N`: the forward model uses `seed`, the reverse one a seed derived from it.
        package var seed: UInt64
        /// `--loss-per-stream`: each RTP stream (told apart by its SSRC) loses packets by its own
        /// loss model, seeded from `seed` and the SSRC, instead of one model for everything on the
        /// direction. Two runs that send the same packets of a stream then lose the same ones,
        /// whatever else shares the link and however it interleaves, which makes A/B runs (with and
        /// without a repair mechanism) compare like with like. RTCP, STUN and other datagrams, and
        /// the streams beyond the first `ImpairmentRelay.maxLossStreams` on a direction, share the
        /// direction's model. Delay, jitter, reordering, duplication and the rate limit stay shared.
        package var lossPerStream = false
        /// Most packets waiting in the relay (per direction) for their delivery time; more are
        /// dropped and counted as overflow.
        package var maxQueuedPackets: Int = 4096
        /// Largest datagram relayed whole; longer ones are truncated and counted.
        package var maxPacketSize: Int = 2048

        /// Help text for the options `init(arguments:)` accepts, for the CLI's `relay --help`.
        package static let usage = """
            relay --listen PORT|HOST:PORT --to HOST:PORT [options]
              --loss P           share of packets lost (fraction, 0.02 = 2 %)
              --burst N          mean loss burst length in packets (Gilbert model when > 1)
              --delay MS         fixed one-way delay
              --jitter MS        uniform delay variation of +/- MS (order is kept)
              --reorder P        share of packets held back so later ones overtake them
              --reorder-delay MS how long a reordered packet is held (default 20)
              --duplicate P      share of packets delivered twice
              --rate BPS         link rate in bit/s (UDP payload), 0 = unlimited
              --queue MS         rate limiter queue before tail drop (default 100)
              --seed N           random seed (default 1); same seed, same decisions
              --forward-only     impair only listen -> to, not the replies
              --loss-per-stream  each RTP stream (SSRC) has its own loss draws
            """

        /// A relay from `listen` to `to`, with `impairment` in both directions unless `reverse` is given.
        package init(
            listen: SocketAddress, to: SocketAddress, impairment: ImpairmentModel.Settings = .init(),
            reverse: ImpairmentModel.Settings? = nil, seed: UInt64 = 1
        ) {
            self.listen = listen
            self.to = to
            forward = impairment
            self.reverse = reverse ?? impairment
            self.seed = seed
        }

        /// Parses the CLI options (without the `relay` word). `--listen` and `--to` are required.
        package init(arguments: [String]) throws(ImpairmentRelayConfigurationError) {
            var listen: SocketAddress? = nil
            var to: SocketAddress? = nil
            var settings = ImpairmentModel.Settings()
            var seed: UInt64 = 1
            var forwardOnly = false
            var lossPerStream = false
            var i = 0
            func value(_ option: String) throws(ImpairmentRelayConfigurationError) -> String {
                guard i + 1 < arguments.count else {
                    throw ImpairmentRelayConfigurationError(option: option, reason: "missing value")
                }
                i += 1
                return arguments[i]
            }
            func number(_ option: String) throws(ImpairmentRelayConfigurationError) -> Double {
                let text = try value(option)
                guard let v = Double(text), v.isFinite else {
                    throw ImpairmentRelayConfigurationError(option: option, reason: "'\(text)' is not a number")
                }
                return v
            }
            while i < arguments.count {
                let option = arguments[i]
                switch option {
                case "--listen":
                    let text = try value(option)
                    do {
                        if let port = UInt16(text) {
                            listen = .anyIPv4(port: port)
                        } else {
                            listen = try SocketAddress(parsing: text)
                        }
                    } catch {
                        throw ImpairmentRelayConfigurationError(option: option, reason: error.description)
                    }
                case "--to":
                    let text = try value(option)
                    do { to = try SocketAddress(parsing: text) } catch {
                        throw ImpairmentRelayConfigurationError(option: option, reason: error.description)
                    }
                case "--loss": settings.loss = try number(option)
                case "--burst": settings.burst = try number(option)
                case "--delay": settings.delayMilliseconds = try number(option)
                case "--jitter": settings.jitterMilliseconds = try number(option)
                case "--reorder": settings.reorder = try number(option)
                case "--reorder-delay": settings.reorderDelayMilliseconds = try number(option)
                case "--duplicate": settings.duplicate = try number(option)
                case "--queue": settings.queueLimitMilliseconds = try number(option)
                case "--rate":
                    let text = try value(option)
                    guard let v = Int(text), v >= 0 else {
                        throw ImpairmentRelayConfigurationError(
                            option: option, reason: "'\(text)' is not a rate in bits per second")
                    }
                    settings.rateBitsPerSecond = v
                case "--seed":
                    let text = try value(option)
                    guard let v = UInt64(text) else {
                        throw ImpairmentRelayConfigurationError(option: option, reason: "'\(text)' is not an unsigned integer")
                    }
                    seed = v
                case "--forward-only": forwardOnly = true
                case "--loss-per-stream": lossPerStream = true
                default:
                    throw ImpairmentRelayConfigurationError(option: option, reason: "unknown option")
                }
                i += 1
            }
            if let problem = settings.problem { throw ImpairmentRelayConfigurationError(option: "impairment", reason: problem) }
            guard let listen else { throw ImpairmentRelayConfigurationError(option: "--listen", reason: "required") }
            guard let to else { throw ImpairmentRelayConfigurationError(option: "--to", reason: "required") }
            self.init(listen: listen, to: to, impairment: settings, reverse: forwardOnly ? .init() : nil, seed: seed)
            self.lossPerStream = lossPerStream
        }
    }
}
