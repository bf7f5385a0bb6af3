// A roscpp subscriber to any type (topic_tools::ShapeShifter): one line per message,
// "topic datatype md5sum arrival_ns hexbytes", until argv[1] messages or argv[2] seconds.
#include <ros/ros.h>
#include <topic_tools/shape_shifter.h>
#include <ros/callback_queue.h>
#include <boost/bind/bind.hpp>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <chrono>

static long want = 0, got = 0;

static void on(const ros::MessageEvent<topic_tools::ShapeShifter const>& ev, const std::string& topic) {
  auto m = ev.getMessage();
  std::vector<uint8_t> buf(m->size());
  ros::serialization::OStream s(buf.data(), buf.size());
  m->write(s);
  long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
  std::printf("%s %s %s %ld ", topic.c_str(), m->getDataType().c_str(), m->getMD5Sum().c_str(), ns);
  for (auto b : buf) std::printf("%02x", b);
  std::printf("\n");
  std::fflush(stdout);
  ++got;
}

int main(int argc, char** argv) {
  ros::init(argc, argv, "bl_sub", ros::init_options::AnonymousName | ros::init_options::NoSigintHandler);
  want = std::atol(argv[1]);
  double secs = std::atof(argv[2]);
  ros::NodeHandle nh;
  std::vector<ros::Subscriber> subs;
  for (int i = 3; i < argc; ++i) {
    std::string t = argv[i];
    subs.push_back(nh.subscribe<topic_tools::ShapeShifter>(
        t, 100000, boost::bind(&on, boost::placeholders::_1, t), ros::VoidConstPtr(), ros::TransportHints().tcpNoDelay()));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  ros::Time::init();
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
  ros::CallbackQueue* q = ros::getGlobalCallbackQueue();
  while (ros::ok() && got < want && std::chrono::steady_clock::now() < end) q->callAvailable(ros::WallDuration(0.05));
  return 0;
}
