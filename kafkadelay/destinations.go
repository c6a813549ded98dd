package kafkadelay

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxCreates is how many times the republisher creates a destination topic
// that stays unknown before it dead-letters the records to it.
const maxCreates = 5

// creator creates missing destination topics (Config.CreateDestinations).
type creator struct {
	cl         *kgo.Client
	partitions int32
	replicas   int16
	log        *slog.Logger

	mu     sync.Mutex
	topics map[string]*creation
}

// creation is the state of one destination topic's creation.
type creation struct {
	running bool      // a CreateTopics request is under way
	tries   int       // requests answered
	last    time.Time // when the last request was answered
	refused string    // why the cluster refused to create it, for good
}

func newCreator(cl *kgo.Client, partitions int32, replicas int16, log *slog.Logger) *creator {
	return &creator{cl: cl, partitions: partitions, replicas: replicas, log: log, topics: make(map[string]*creation)}
}

// retryAfterCreate reports whether a release to topic that failed with err
// should be retried because the topic is being (or was just) created. It
// starts the creation when none is running. It never blocks (it is called
// with the republisher's lock held). A nil creator (CreateDestinations off)
// retries nothing.
func (c *creator) retryAfterCreate(topic string, err error) bool {
	if c == nil || !(errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID)) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.topics[topic]
	if st == nil {
		st = &creation{}
		c.topics[topic] = st
	}
	switch {
	case st.refused != "":
		return false
	case st.running:
		return true
	case st.tries >= maxCreates:
		return false
	case st.tries > 0 && time.Since(st.last) < time.Second:
		// Created a moment ago: the cluster's metadata may lag.
		return true
	}
	st.running = true
	go c.create(topic, st)
	return true
}

// create sends one CreateTopics request for topic.
func (c *creator) create(topic string, st *creation) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = c.partitions
	rt.ReplicationFactor = c.replicas
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil && len(resp.Topics) != 1 {
		err = errors.New("kafkadelay: CreateTopics answered no topic")
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st.running = false
	st.tries++
	st.last = time.Now()
	switch {
	case err == nil:
		c.log.Info("kafkadelay: created destination topic", "topic", topic, "partitions", c.partitions, "replication_factor", c.replicas)
	case errors.Is(err, kerr.TopicAlreadyExists):
	case permanentCreate(err):
		st.refused = err.Error()
		c.log.Error("kafkadelay: cannot create destination topic; its records are dead-lettered", "topic", topic, "err", err)
	default:
		c.log.Warn("kafkadelay: creating destination topic failed; retrying", "topic", topic, "attempt", st.tries, "err", err)
	}
}

// permanentCreate reports whether a CreateTopics error will not go away by
// retrying.
func permanentCreate(err error) bool {
	for _, k := range []*kerr.Error{
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.PolicyViolation,
		kerr.InvalidTopicException, kerr.InvalidPartitions, kerr.InvalidReplicationFactor,
		kerr.InvalidReplicaAssignment, kerr.InvalidConfig, kerr.UnsupportedVersion,
	} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}
