import MediaCore
import MediaTools
import Testing

private let ms: UInt64 = 1_000_000

/// Runs `count` packets of `size` bytes, `spacing` ns apart, through a model.
private func run(
    _ settings: ImpairmentModel.Settings, seed: UInt64 = 42, count: Int = 100_000,
    spacing: UInt64 = ms, size: Int = 200
) -> (ImpairmentModel, [ImpairmentModel.Decision]) {
    var model = ImpairmentModel(settings: settings, seed: seed)
    var decisions: [ImpairmentModel.Decision] = []
    decisions.reserveCapacity(count)
    for i in 0..<count { decisions.append(model.decide(arrival: UInt64(i) * spacing, size: size)) }
    return (model, decisions)
}

extension ImpairmentModel.Decision {
    fileprivate var isDrop: Bool { if case .drop = self { return true } else { return false } }
    fileprivate var time: UInt64? {
        switch self {
        case .drop: return nil
        case .deliver(let at): return at
        case .deliverTwice(let at, _): return at
        }
    }
}

@Suite struct ImpairmentModelTests {
    @Test func generatorMatchesReferenceXoshiro256StarStar() {
        // First outputs of xoshiro256** seeded by splitmix64(12345), computed with a Python
        // transcription of the reference C code at prng.di.unimi.it.
        var g = SeededGenerator(seed: 12345)
        #expect(
            (0..<5).map { _ in g.next() } == [
                0xbe6a36374160d49b, 0x214aaa0637a688c6, 0xf69d16de9954d388, 0x0c60048c4e96e033, 0x8e2076aeed51c648,
            ])
    }

    @Test func transparentSettingsDeliverEveryPacketOnArrival() {
        let (model, decisions) = run(.init(), count: 1000)
        #expect(decisions.enumerated().allSatisfy { $0.element == .deliver(at: UInt64($0.offset) * ms) })
        #expect(model.counters.delivered == 1000 && model.counters.packets == 1000)
    }

    @Test func randomLossMatchesConfiguredRate() {
        let (model, decisions) = run(.init(loss: 0.05))
        let lost = decisions.filter { $0 == .drop(.loss) }.count
        #expect(lost == model.counters.lost)
        #expect(abs(Double(lost) / 100_000 - 0.05) < 0.005, "loss \(lost)")
        #expect(model.counters.delivered + lost == 100_000)
        // Independent losses: mean run length 1/(1-p) ≈ 1.05.
        let meanRun = Double(model.counters.lost) / Double(model.counters.lossBursts)
        #expect(abs(meanRun - 1 / 0.95) < 0.05)
    }

    @Test func burstLossHasConfiguredRateAndMeanBurstLength() {
        let (model, decisions) = run(.init(loss: 0.02, burst: 3))
        var runs: [Int] = []
        var current = 0
        for d in decisions {
            if d.isDrop { current += 1 } else if current > 0 { runs.append(current); current = 0 }
        }
        if current > 0 { runs.append(current) }
        let lost = runs.reduce(0, +)
        #expect(lost == model.counters.lost && runs.count == model.counters.lossBursts)
        #expect(abs(Double(lost) / 100_000 - 0.02) < 0.005, "loss \(lost)")
        let mean = Double(lost) / Double(runs.count)
        #expect(abs(mean - 3) < 0.4, "mean burst \(mean)")
        #expect(runs.contains { $0 >= 6 }, "geometric bursts have a tail")
    }

    @Test func sameSeedGivesSameDecisionsAndOtherSeedsDiffer() {
        let settings = ImpairmentModel.Settings(
            loss: 0.1, burst: 2, delayMilliseconds: 30, jitterMilliseconds: 10,
            reorder: 0.05, duplicate: 0.02, rateBitsPerSecond: 2_000_000)
        let a = run(settings, seed: 7, count: 20_000)
        let b = run(settings, seed: 7, count: 20_000)
        let c = run(settings, seed: 8, count: 20_000)
        #expect(a.1 == b.1)
        #expect(a.0.counters == b.0.counters)
        #expect(a.1 != c.1)
    }

    @Test func theLossStageAloneDrawsTheSameLossesAsAWholeDecision() {
        // Loss is the first stage and, with nothing else set, the only random draw: `drawLoss()`
        // must lose the same packets that `decide` drops, and count them the same way.
        let settings = ImpairmentModel.Settings(loss: 0.05, burst: 3)
        var whole = ImpairmentModel(settings: settings, seed: 21)
        var lossOnly = ImpairmentModel(settings: settings, seed: 21)
        let dropped = (0..<20_000).map { whole.decide(arrival: UInt64($0), size: 10) == .drop(.loss) }
        let drawn = (0..<20_000).map { _ in lossOnly.drawLoss() }
        #expect(dropped == drawn)
        #expect(lossOnly.counters.lost == whole.counters.lost && lossOnly.counters.lossBursts == whole.counters.lossBursts)
        #expect(lossOnly.counters.packets == 0)
        // Skipping the loss stage delivers everything.
        var lossless = ImpairmentModel(settings: settings, seed: 21)
        let delivered = (0..<1000).filter {
            lossless.decide(arrival: UInt64($0), size: 10, applyingLoss: false) == .deliver(at: UInt64($0))
        }
        #expect(delivered.count == 1000 && lossless.counters.lost == 0 && lossless.counters.delivered == 1000)
    }

    @Test func jitterStaysWithinBoundsAroundTheDelay() {
        // 20 ms spacing > 2 x jitter: order keeping never moves a packet, so the raw spread shows.
        let (_, decisions) = run(.init(delayMilliseconds: 50, jitterMilliseconds: 10), count: 20_000, spacing: 20 * ms)
        let delays = decisions.enumerated().map { Double($0.element.time! - UInt64($0.offset) * 20 * ms) / 1e6 }
        #expect(delays.allSatisfy { $0 >= 40 && $0 <= 60 })
        let mean = delays.reduce(0, +) / Double(delays.count)
        let sd = (delays.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(delays.count)).squareRoot()
        #expect(abs(mean - 50) < 0.3, "mean \(mean)")
        #expect(abs(sd - 10 / 3.0.squareRoot()) < 0.3, "sd \(sd)")  // uniform ±10 ms
        #expect(delays.min()! < 41 && delays.max()! > 59)
    }

    @Test func jitterAloneKeepsPacketOrder() {
        let (model, decisions) = run(.init(delayMilliseconds: 5, jitterMilliseconds: 30), count: 10_000)
        let times = decisions.map { $0.time! }
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(model.counters.reordered == 0)
        #expect(times.enumerated().allSatisfy { $0.element <= UInt64($0.offset) * ms + 35 * ms })
    }

    @Test func reorderedPacketsAreOvertakenByLaterOnes() {
        var model = ImpairmentModel(settings: .init(delayMilliseconds: 10, reorder: 0.05, reorderDelayMilliseconds: 20), seed: 3)
        var times: [UInt64] = []
        var held: [Int] = []
        for i in 0..<100_000 {
            let before = model.counters.reordered
            times.append(model.decide(arrival: UInt64(i) * ms, size: 100).time!)
            if model.counters.reordered > before { held.append(i) }
        }
        #expect(held.count == model.counters.reordered)
        #expect(abs(Double(held.count) / 100_000 - 0.05) < 0.005, "reordered \(held.count)")
        let heldSet = Set(held)
        var overtaken = 0
        for i in held where i + 1 < times.count {
            // The next packet that was not itself held arrives before this one.
            if let j = ((i + 1)..<min(i + 10, times.count)).first(where: { !heldSet.contains($0) }) {
                #expect(times[j] < times[i])
                overtaken += 1
            }
        }
        #expect(overtaken > held.count * 9 / 10)
        // Packets that were not held keep their order.
        let inOrder = times.enumerated().filter { !heldSet.contains($0.offset) }.map(\.element)
        #expect(zip(inOrder, inOrder.dropFirst()).allSatisfy { $0 <= $1 })
    }

    @Test func duplicatesAreCountedAndDeliveredTogether() {
        let (model, decisions) = run(.init(duplicate: 0.03))
        var twice = 0
        for d in decisions {
            if case .deliverTwice(let at, let again) = d { twice += 1; #expect(at == again) }
        }
        #expect(twice == model.counters.duplicated)
        #expect(abs(Double(twice) / 100_000 - 0.03) < 0.004, "duplicated \(twice)")
    }

    @Test func rateLimitDeliversTheLinkRateAndTailDropsTheRest() {
        // 5 Mbit/s offered for 1 s (1250-byte packets every 2 ms) into a 1 Mbit/s link with a
        // 100 ms queue.
        let (model, decisions) = run(
            .init(rateBitsPerSecond: 1_000_000, queueLimitMilliseconds: 100),
            count: 500, spacing: 2 * ms, size: 1250)
        let deliveredTimes = decisions.compactMap(\.time)
        let bitsWithinOneSecond = deliveredTimes.filter { $0 <= 1000 * ms }.count * 1250 * 8
        #expect(abs(Double(bitsWithinOneSecond) - 1_000_000) <= 200_000, "\(bitsWithinOneSecond) bits in 1 s")
        #expect(model.counters.queueDropped + model.counters.delivered == 500)
        #expect(model.counters.queueDropped > 350)
        // The link never runs faster than its rate: 10 ms per 1250-byte packet.
        #expect(zip(deliveredTimes, deliveredTimes.dropFirst()).allSatisfy { $1 - $0 >= 10 * ms })
        // And the queue never holds more than 100 ms (plus one packet on the wire).
        for (i, d) in decisions.enumerated() {
            if let t = d.time { #expect(t - UInt64(i) * 2 * ms <= 110 * ms) }
        }
    }

    @Test func rateLimitPassesTrafficBelowTheRateUntouched() {
        let (model, decisions) = run(.init(rateBitsPerSecond: 1_000_000), count: 1000, spacing: 20 * ms, size: 1250)
        #expect(model.counters.queueDropped == 0)
        #expect(decisions.enumerated().allSatisfy { $0.element.time! == UInt64($0.offset) * 20 * ms + 10 * ms })
    }

    @Test func invalidSettingsAreDescribed() {
        #expect(ImpairmentModel.Settings(loss: 1.5).problem?.contains("loss") == true)
        #expect(ImpairmentModel.Settings(jitterMilliseconds: -1).problem?.contains("jitter") == true)
        #expect(ImpairmentModel.Settings(loss: 1, burst: 3).problem != nil)
        #expect(ImpairmentModel.Settings(loss: 0.02, burst: 3).problem == nil)
        #expect(ImpairmentModel.Settings().isTransparent)
    }
}
