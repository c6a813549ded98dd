package ontimedriver

import "time"

// TopicFaults is implemented by drivers that can tell which topics their
// store cannot serve right now, although the store as a whole answers: on
// a Redis Cluster, the topics whose master is down (until its replica is
// promoted and the client has learnt it). ontime serve shows them in
// /readyz and in a metric.
type TopicFaults interface {
	// UnavailableTopics lists the topics whose last store call failed
	// with an error that says the store could not be reached (not a
	// reply of the store), sorted by topic. A topic leaves the list at its
	// next call that succeeds, or when no call has failed on it for a
	// while (the driver says how long).
	UnavailableTopics() []TopicFault
}

// TopicFault is one topic the store cannot serve now.
type TopicFault struct {
	// Topic is the topic.
	Topic string
	// Since is when its calls began to fail.
	Since time.Time
	// Last is when a call on it last failed.
	Last time.Time
	// Err is the last error.
	Err string
}
