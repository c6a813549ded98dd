package kafkadelay_test

const childEnv = "KAFKADELAY_TEST_CHILD"

func runChild() int { return 0 }
