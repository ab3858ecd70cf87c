// The reconnection decisions of a Janus session (`JanusReconnectPlan`), fed with failures at
// chosen instants: no clock runs. The real reconnection against Janus is CallSFUReclaimTests'.
import MediaCore
import Testing

struct JanusReconnectPlanTests {
    static func at(_ seconds: Double) -> MonotonicTime { .zero + .milliseconds(Int64(seconds * 1000)) }

    @Test func delaysDoubleUpToTheMaximumAndStopAtTheWindow() {
        var plan = JanusReconnectPlan(window: .seconds(10))
        var t = 0.0
        var delays: [Duration] = []
        while case .retry(let d) = plan.failed(at: Self.at(t)) {
            delays.append(d)
            t += Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        }
        #expect(delays == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4)])
        // The next attempt would have started after 11.75 s, past the 10 s window.
        #expect(plan.state == .lost)
        #expect(plan.failed(at: Self.at(t)) == .giveUp)
        #expect(plan.reclaims == 0)
    }

    @Test func aReclaimStartsTheNextBreakAfresh() {
        var plan = JanusReconnectPlan(window: .seconds(25))
        #expect(plan.failed(at: Self.at(0)) == .retry(after: .milliseconds(250)))
        #expect(plan.failed(at: Self.at(0.3)) == .retry(after: .milliseconds(500)))
        #expect(plan.isReconnecting)
        plan.reclaimed()
        #expect(plan.state == .connected && plan.reclaims == 1)
        // Reclaimed twice in a row counts once; a reclaim without a break counts nothing.
        plan.reclaimed()
        #expect(plan.reclaims == 1)
        // A later break: the window and the delays start again from it.
        #expect(plan.failed(at: Self.at(100)) == .retry(after: .milliseconds(250)))
        #expect(plan.state == .reconnecting(since: Self.at(100), attempts: 0))
    }

    @Test func aSessionTheServerDroppedIsNotTriedAgain() {
        var plan = JanusReconnectPlan(window: .seconds(25))
        _ = plan.failed(at: Self.at(0))
        plan.gone()
        #expect(plan.state == .lost && !plan.isReconnecting)
        #expect(plan.failed(at: Self.at(1)) == .giveUp)
        plan.reclaimed()
        #expect(plan.state == .lost && plan.reclaims == 0)
    }

    /// A 3 s cut as the session lives it: each attempt while the link is down fails at once, the
    /// first one after it succeeds. The session is back at most one (longest) delay after the
    /// link, after a handful of attempts; with a cut past the window it is given up.
    @Test func aThreeSecondCutIsReclaimedWithinOneDelayOfTheLinkComingBack() {
        for (cut, window, reclaimed) in [(3.0, 25.0, true), (3.0, 5.0, true), (8.0, 7.0, false), (30.0, 25.0, false)] {
            var plan = JanusReconnectPlan(window: .seconds(window))
            var t = 0.0, attempts = 0
            var decision = plan.failed(at: Self.at(t))
            while case .retry(let d) = decision {
                t += Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
                attempts += 1
                if t >= cut {
                    plan.reclaimed()
                    break
                }
                decision = plan.failed(at: Self.at(t))
            }
            #expect((plan.state == .connected) == reclaimed, "cut \(cut) s, window \(window) s: \(plan.state)")
            if reclaimed {
                #expect(t - cut <= 4 && attempts <= 6, "back \(t - cut) s after the link, \(attempts) attempts")
                #expect(plan.reclaims == 1)
            } else {
                #expect(t <= window, "gave up at \(t) s")
            }
        }
    }

    @Test func theWindowFollowsTheServersTimeouts() {
        // WebSocket: the reclaim timeout (0 by default: the session ends with its connection).
        #expect(JanusReconnectPlan.window(webSocket: true, sessionTimeout: 60, reclaimTimeout: 20) == .seconds(25))
        #expect(JanusReconnectPlan.window(webSocket: true, sessionTimeout: 60, reclaimTimeout: nil) == .seconds(5))
        // HTTP: the session timeout (60 s by default).
        #expect(JanusReconnectPlan.window(webSocket: false, sessionTimeout: 10, reclaimTimeout: 20) == .seconds(15))
        #expect(JanusReconnectPlan.window(webSocket: false, sessionTimeout: nil, reclaimTimeout: nil) == .seconds(65))
        // Hostile values are bounded.
        #expect(JanusReconnectPlan.window(webSocket: false, sessionTimeout: -5, reclaimTimeout: nil) == .seconds(5))
        #expect(JanusReconnectPlan.window(webSocket: true, sessionTimeout: nil, reclaimTimeout: Int.max) == .seconds(605))
    }
}
